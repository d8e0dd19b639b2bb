"""API keys from careless hands: a key file with two lines, CR/LF or non-ASCII in a key, a binary key file, a key
file other users can read. One line of error that never shows the key (or any part of it); a warning for the mode."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vastui.cli import main
from vastui.config import Secret, resolve_api_key
from vastui.errors import ConfigError

FIRST, SECOND = "firstpartKEY0123", "SECONDPARTsecret99"


def key_file(home: Path, content: bytes, *, mode: int = 0o600) -> Path:
    path = home / ".config" / "vastai" / "vast_api_key"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    path.chmod(mode)
    return path


@pytest.mark.parametrize("content", [f"{FIRST}\n{SECOND}\n".encode(), f"{FIRST}\r\n{SECOND}".encode(),
                                     f"{FIRST}\r{SECOND}".encode()])
def test_a_key_file_with_two_lines_is_refused_without_showing_either(tmp_path: Path, content: bytes) -> None:
    path = key_file(tmp_path, content)
    with pytest.raises(ConfigError) as caught:
        resolve_api_key(explicit=None, env={}, home=tmp_path)
    text = str(caught.value)
    assert str(path) in text and "one line" in text
    assert FIRST not in text and SECOND not in text and "\n" not in text


@pytest.mark.parametrize("where", ["explicit", "env"])
@pytest.mark.parametrize("bad", [f"{FIRST}\r\n{SECOND}", f"{FIRST}\nX-Evil: {SECOND}", f"{FIRST} {SECOND}",
                                 f"{FIRST}ключ{SECOND}", f"{FIRST}\x00{SECOND}"])
def test_a_key_with_line_breaks_spaces_or_non_ascii_is_refused(tmp_path: Path, where: str, bad: str) -> None:
    with pytest.raises(ConfigError) as caught:
        if where == "explicit":
            resolve_api_key(explicit=bad, env={}, home=tmp_path)
        else:
            resolve_api_key(explicit=None, env={"VAST_API_KEY": bad}, home=tmp_path)
    text = str(caught.value)
    assert FIRST not in text and SECOND not in text and "ключ" not in text and "\n" not in text
    assert ("--api-key" if where == "explicit" else "VAST_API_KEY") in text


@pytest.mark.parametrize("content", [b"\xff\xfe\x00binary\x01key", "clé-latin1".encode("latin-1"),
                                     b"\x89PNG\r\n\x1a\n\x00\x00"])
def test_a_binary_or_non_utf8_key_file_is_a_config_error(tmp_path: Path, content: bytes) -> None:
    path = key_file(tmp_path, content)
    with pytest.raises(ConfigError) as caught:
        resolve_api_key(explicit=None, env={}, home=tmp_path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_a_key_file_other_users_can_read_gives_a_warning_not_an_error(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    path = key_file(tmp_path, f"{FIRST}\n".encode(), mode=0o644)
    with caplog.at_level(logging.WARNING):
        resolved = resolve_api_key(explicit=None, env={}, home=tmp_path)
    assert resolved.key == Secret(FIRST)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and str(path) in warned[0] and "0644" in warned[0] and "chmod 600" in warned[0]
    assert FIRST not in warned[0]
    caplog.clear()
    path.chmod(0o600)
    with caplog.at_level(logging.WARNING):
        resolve_api_key(explicit=None, env={}, home=tmp_path)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_the_wide_key_file_warning_reaches_stderr_of_the_cli() -> None:
    home = Path(os.environ["HOME"])
    path = key_file(home, f"{FIRST}\n".encode(), mode=0o644)
    # nothing listens on port 9 of loopback: the command fails after the warning, which is all this test needs
    result = subprocess.run([sys.executable, "-m", "vastui", "instances", "--url", "http://127.0.0.1:9"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert f"the API key file {path} can be read by other users (mode 0644)" in result.stderr
    assert FIRST not in result.stderr + result.stdout and "Traceback" not in result.stderr


@pytest.mark.parametrize("argv_key", [f"{FIRST}\r\nX-Evil: {SECOND}", "ключ-non-ascii"])
def test_the_cli_gives_one_line_for_a_bad_key_and_never_shows_it(argv_key: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["offers", "--url", "http://127.0.0.1:9", "--limit", "1", "--api-key", argv_key]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and "--api-key" in err
    assert SECOND not in err and "ключ" not in err and FIRST not in err


def test_the_cli_gives_one_line_for_a_two_line_key_file(capsys: pytest.CaptureFixture[str]) -> None:
    key_file(Path(os.environ["HOME"]), f"{FIRST}\n{SECOND}\n".encode())
    assert main(["offers", "--url", "http://127.0.0.1:9", "--limit", "1"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "one line" in err
    assert SECOND not in err and FIRST not in err
