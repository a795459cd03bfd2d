"""One ``memlane serve`` per data directory (docs/operations.md §One node per directory).

``serve.lock`` in the data directory is held with ``flock`` for as long as the process
serves; a second ``serve`` of the same directory is refused before it binds a port or dials a
peer (two processes would otherwise dial the mesh with one key).  The kernel releases the
lock when the process ends however it ends, ``kill -9`` included, so a lock is never stale;
the file itself stays, holding the process id of its last holder for the refusal's message.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from node.errors import AlreadyServing, NotInitialised
from node.identity import DB_FILE

__all__ = ["LOCK_FILE", "serve_lock"]

LOCK_FILE = "serve.lock"


@contextmanager
def serve_lock(data: Path) -> Iterator[None]:
    """Hold ``data``'s serve lock while the block runs; ``AlreadyServing`` when another
    process holds it, ``NotInitialised`` when ``data`` holds no node."""
    data = data.expanduser()
    if not (data / DB_FILE).exists():
        raise NotInitialised(f"no node in {data} (run `memlane init --data {data}`)")
    fd = os.open(data / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        _take(fd, data)
        yield
    finally:
        os.close(fd)  # releases the lock


def _take(fd: int, data: Path) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        by = f" by process {holder}" if holder.isdigit() else ""
        raise AlreadyServing(
            f"{data} is already being served{by}: one `memlane serve` per data directory"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
