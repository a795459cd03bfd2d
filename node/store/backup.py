"""An online backup of the store into another file: one consistent read of a store that may
be in use (docs/operations.md §Backups)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from node.store.connection import Connection

__all__ = ["backup_without"]


async def backup_without(
    db: Path, copy: Path, *, take: str, drop: str
) -> tuple[list[list[Any]], dict[str, bytes]]:
    """Back the store at ``db`` up into ``copy``, then read the rows of ``take`` from the copy
    and run ``drop`` there — overwritten on disk (``secure_delete``, then ``VACUUM``), not just
    unlinked; return those rows and the copy's ``state``."""

    def run(dst: sqlite3.Connection) -> tuple[list[list[Any]], dict[str, bytes]]:
        src = sqlite3.connect(db)
        try:
            src.backup(dst)
        finally:
            src.close()
        dst.execute("PRAGMA journal_mode=DELETE").fetchall()
        dst.execute("PRAGMA secure_delete=ON").fetchall()
        rows = [list(row) for row in dst.execute(take).fetchall()]
        dst.execute(drop).fetchall()
        dst.commit()
        dst.execute("VACUUM")
        state = {str(k): bytes(v) for k, v in dst.execute("SELECT key, value FROM state")}
        return rows, state

    async with await Connection.open(copy) as dst:
        return await dst.call(run)
