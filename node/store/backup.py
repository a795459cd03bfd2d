"""An online backup of the store into another file: one consistent read of a store that may
be in use (docs/operations.md §Backups)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiosqlite

__all__ = ["backup_without"]


async def backup_without(
    db: Path, copy: Path, *, take: str, drop: str
) -> tuple[list[list[Any]], dict[str, bytes]]:
    """Back the store at ``db`` up into ``copy``, then read the rows of ``take`` from the copy
    and run ``drop`` there — overwritten on disk (``secure_delete``, then ``VACUUM``), not just
    unlinked; return those rows and the copy's ``state``."""
    async with aiosqlite.connect(db) as src, aiosqlite.connect(copy) as dst:
        await src.backup(dst)
        await dst.execute("PRAGMA journal_mode=DELETE")
        await dst.execute("PRAGMA secure_delete=ON")
        async with dst.execute(take) as cur:
            rows = [list(row) for row in await cur.fetchall()]
        await dst.execute(drop)
        await dst.commit()
        await dst.execute("VACUUM")
        async with dst.execute("SELECT key, value FROM state") as cur:
            state = {str(k): bytes(v) for k, v in await cur.fetchall()}
    return rows, state
