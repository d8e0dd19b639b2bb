"""Inputs are content: read back only as the very file digested at load, whatever happens to the path since."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vastui.bench.inputs import InputFile, hash_input, pinned_chunks
from vastui.errors import InputChanged

SECRET = b"-----BEGIN OPENSSH PRIVATE KEY----- not for hosts\n"


def _fail(reason: str) -> None:
    raise AssertionError(reason)


def _pinned(tmp_path: Path, data: bytes = b"line one\nline two\n") -> InputFile:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "in.jsonl").write_bytes(data)
    (tmp_path / "secret.txt").write_bytes(SECRET)
    return hash_input("in.jsonl", base=folder, fail=_fail)  # type: ignore[arg-type]


def test_the_unchanged_input_streams_its_pinned_bytes_in_chunks(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40
    item = _pinned(tmp_path, data)
    chunks = list(pinned_chunks(item, chunk_bytes=1000))
    assert b"".join(chunks) == data and max(len(c) for c in chunks) == 1000
    assert item.size_bytes == len(data)


def test_a_symlink_swapped_in_after_loading_is_refused_before_a_byte_is_read(tmp_path: Path) -> None:
    item = _pinned(tmp_path)
    path = tmp_path / "m" / "in.jsonl"
    path.unlink()
    path.symlink_to("../secret.txt")
    stream = pinned_chunks(item)
    with pytest.raises(InputChanged, match=r"input 'in.jsonl' changed since the manifest was loaded"):
        next(stream)


def test_a_file_put_in_its_place_is_refused(tmp_path: Path) -> None:
    item = _pinned(tmp_path)
    path = tmp_path / "m" / "in.jsonl"
    replacement = tmp_path / "m" / "other"
    replacement.write_bytes(path.read_bytes())   # the same bytes, but not the file that was digested
    os.replace(replacement, path)
    with pytest.raises(InputChanged, match="another file has taken its place"):
        next(pinned_chunks(item))


def test_bytes_changed_in_place_are_caught_even_with_the_old_size_and_time(tmp_path: Path) -> None:
    item = _pinned(tmp_path)
    path = tmp_path / "m" / "in.jsonl"
    with path.open("r+b") as handle:             # same inode, same size
        handle.write(b"LINE")
    os.utime(path, ns=(item.mtime_ns, item.mtime_ns))   # and the old modification time
    with pytest.raises(InputChanged, match="no longer match the sha256"):
        list(pinned_chunks(item))


def test_a_resized_input_is_refused_before_reading(tmp_path: Path) -> None:
    item = _pinned(tmp_path)
    with (tmp_path / "m" / "in.jsonl").open("ab") as handle:
        handle.write(b"more\n")
    with pytest.raises(InputChanged, match="size or modification time"):
        next(pinned_chunks(item))


def test_a_nul_in_an_input_path_is_a_reason_not_a_traceback(tmp_path: Path) -> None:
    reasons: list[str] = []

    def fail(reason: str) -> None:
        reasons.append(reason)
        raise LookupError(reason)

    with pytest.raises(LookupError):
        hash_input("in\x00.jsonl", base=tmp_path, fail=fail)  # type: ignore[arg-type]
    assert reasons and "cannot follow input file path" in reasons[0]
