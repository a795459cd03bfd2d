"""The bytes an archive's writing and unpacking have gone through, told to a ``Progress``."""

from __future__ import annotations

from typing import IO

from node.progress import Progress

__all__ = ["ByteCounter", "CountingReader", "quiet"]


def quiet(phase: str, done: int, total: int) -> None:
    """The ``Progress`` of a caller that asked to be told nothing."""


class ByteCounter:
    """Bytes gone through, told to ``told`` a MiB at a time, and once at the end."""

    def __init__(self, phase: str, total: int, told: Progress) -> None:
        self.phase, self.total, self.told, self.done = phase, total, told, 0

    def add(self, n: int) -> None:
        before, self.done = self.done, self.done + n
        if before >> 20 != self.done >> 20:
            self.told(self.phase, self.done, max(self.total, self.done))

    def finish(self) -> None:
        self.told(self.phase, self.done, self.done)


class CountingReader:
    """A file that counts the bytes read from it (all ``tarfile`` asks of a file)."""

    def __init__(self, f: IO[bytes], counted: ByteCounter) -> None:
        self.f, self.counted = f, counted

    def read(self, size: int = -1) -> bytes:
        data = self.f.read(size)
        self.counted.add(len(data))
        return data
