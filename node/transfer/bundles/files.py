"""A bundle's and a frontier's files: opened, written beside their place and moved into it,
and the frontier files an exporter is given (``memlane bundle frontier``); ``BundleError``,
what a refused one raises."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

from node.errors import NodeError
from node.replica import Replica
from node.store import Store
from protocol.bundle import FrontierFile, decode_frontier_file, encode_frontier_file
from protocol.errors import ProtocolError
from protocol.frontier import Frontier
from protocol.signing import SigningKey

__all__ = [
    "BATCH_ENTRIES",
    "READ_BYTES",
    "BundleError",
    "finish_file",
    "open_read",
    "open_write",
    "read_frontier",
    "refuse_existing",
    "write_frontier",
]


READ_BYTES = 1 << 20  # bytes read at a time
BATCH_ENTRIES = 1000  # entries per receive batch (and per read of the store on export)


class BundleError(NodeError):
    """A bundle (or frontier file) was refused; nothing of it was stored."""


def open_read(path: Path) -> IO[bytes]:
    """``path`` opened to read; ``BundleError`` when it cannot be."""
    try:
        return path.open("rb")
    except OSError as exc:
        raise BundleError(f"cannot read {path}: {exc.strerror or exc}") from exc


def open_write(path: Path) -> IO[bytes]:
    """A new file at ``path``, opened to write; ``BundleError`` when it cannot be made."""
    try:
        return path.open("xb")
    except OSError as exc:
        raise BundleError(f"cannot write {path}: {exc.strerror or exc}") from exc


def refuse_existing(out: Path) -> None:
    if out.exists():
        raise BundleError(f"{out} already exists")


def finish_file(f: IO[bytes], tmp: Path, out: Path) -> None:
    """``f``, written at ``tmp``, made durable, closed and moved to ``out``."""
    f.flush()
    os.fsync(f.fileno())
    f.close()
    tmp.replace(out)


async def write_frontier(store: Store, key: SigningKey, mesh: bytes, out: Path) -> Frontier:
    """Write this node's frontier to ``out`` for an exporter (``memlane bundle frontier``)."""
    frontier = (await Replica(store, mesh).snapshot()).frontier
    data = encode_frontier_file(FrontierFile(mesh, key.public, frontier))
    tmp = out.with_name(out.name + ".partial")
    f = open_write(tmp)
    f.write(data)
    finish_file(f, tmp, out)
    return frontier


def read_frontier(path: Path, mesh: bytes) -> Frontier:
    f = open_read(path)
    with f:
        data = f.read(1 << 22)
    try:
        file = decode_frontier_file(data)
    except ProtocolError as exc:
        raise BundleError(f"{path} is not a usable frontier file: {exc}") from exc
    if file.mesh != mesh:
        raise BundleError(f"{path} is the frontier of a node of another mesh")
    return file.frontier
