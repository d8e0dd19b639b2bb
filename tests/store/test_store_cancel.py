"""A write cancelled while its transaction begins (an aborted campaign stops its tasks wherever they are) must
not leave the connection inside a transaction: the next write must still work and commit."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from vastui.store import SqliteStore

DIGEST = "sha256:" + "ab" * 32


async def test_a_write_cancelled_at_its_begin_leaves_the_store_writable(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path / "cancel.sqlite3") as store:
        for attempt in range(10):
            write = asyncio.create_task(store.save_manifest(digest=DIGEST, name=f"w{attempt}", toml_text="x = 1",
                                                            stored_at=float(attempt)))
            await asyncio.sleep(0)   # the write now waits on its BEGIN in the connection's thread
            write.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await write
        saved = await store.save_manifest(digest=DIGEST, name="after", toml_text="x = 2", stored_at=99.0)
        assert saved.digest == DIGEST
    async with await SqliteStore.open(tmp_path / "cancel.sqlite3") as reopened:
        kept = await reopened.manifest(DIGEST)
    assert kept is not None, "the write after the cancelled ones was committed"
