"""The writer's SQLite connection in a process of its own (``StoreOptions.statement_process``).

The store's Python (decoding, checks, the views' folds) and SQLite's work on a batch (the
statements, the search index, the commit) take about as long as each other; on one process
they run one after the other, as both need the GIL.  Here the writer connection lives in a
child process, so SQLite works on batch N on the second core while the event loop builds
batch N+1 (docs/benchmarks.md §sync).

``StatementProcess`` stands for a ``sqlite3.Connection`` on the connection's thread
(node/store/connection.py) with the part of its interface the store uses: ``execute`` (its
rows fetched at once), ``executemany``, ``executescript``, ``commit``, ``rollback``,
``in_transaction`` and ``close``.  Each is one message over the child's pipes, a pickled
tuple; ``executemany`` — a batch's rows, a statement at a time — waits for no answer, and a
failure of one is raised by the next call that does (the rows after it are not written).
The child is this file run by the same interpreter, with nothing but the standard library;
it ends when its input closes, so it never outlives the node.
"""

from __future__ import annotations

import builtins
import contextlib
import pickle
import sqlite3
import struct
import subprocess
import sys
from collections.abc import Sequence
from typing import IO, Any

__all__ = ["StatementProcess"]

_SIZE = struct.Struct("<Q")


def _send(out: IO[bytes], message: object) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_SIZE.pack(len(data)) + data)
    out.flush()


def _receive(inp: IO[bytes]) -> Any:
    head = inp.read(_SIZE.size)
    if len(head) < _SIZE.size:
        raise EOFError
    (size,) = _SIZE.unpack(head)
    return pickle.loads(inp.read(size))  # noqa: S301 - our own child, over our own pipe


def _error(kind: str, message: str) -> BaseException:
    """An error the child raised, rebuilt as its class (sqlite3's or a built-in)."""
    cls = getattr(sqlite3, kind, None) or getattr(builtins, kind, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        return cls(message)
    return sqlite3.OperationalError(f"{kind}: {message}")


class _Rows:
    def __init__(self, rows: list[Any]) -> None:
        self._rows = rows

    def fetchall(self) -> list[Any]:
        return self._rows

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None


class StatementProcess:
    """A child process holding one SQLite connection, driven like one."""

    def __init__(self, path: str, **options: Any) -> None:
        self._child = subprocess.Popen(  # noqa: S603 - this interpreter, this file
            [sys.executable, "-I", "-S", __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self._child.stdin is not None
        assert self._child.stdout is not None
        self._out, self._in = self._child.stdin, self._child.stdout
        try:
            self._ask("open", path, options)
        except BaseException:
            self._end()
            raise

    def _ask(self, *message: Any) -> Any:
        try:
            _send(self._out, message)
            answer = _receive(self._in)
        except (OSError, EOFError) as exc:
            raise sqlite3.OperationalError("the statement process ended") from exc
        if answer[0] == "error":
            raise _error(answer[1], answer[2])
        return answer[1]

    def execute(self, sql: str, args: Sequence[Any] | dict[str, Any] = ()) -> _Rows:
        return _Rows(self._ask("execute", sql, args))

    def executemany(self, sql: str, rows: Sequence[Any]) -> None:
        try:
            _send(self._out, ("many", sql, rows))
        except OSError as exc:
            raise sqlite3.OperationalError("the statement process ended") from exc

    def executescript(self, script: str) -> None:
        self._ask("script", script)

    def commit(self) -> None:
        self._ask("commit")

    def rollback(self) -> None:
        self._ask("rollback")

    @property
    def in_transaction(self) -> bool:
        return bool(self._ask("in_transaction"))

    def close(self) -> None:
        """Close the child's connection and wait for it to end (at once if it has)."""
        try:
            if self._child.poll() is None:
                self._ask("close")
        finally:
            self._end()

    def _end(self) -> None:
        for pipe in (self._out, self._in):
            with contextlib.suppress(OSError):
                pipe.close()
        self._child.wait()


# -- the child -----------------------------------------------------------------------------------


def _serve(inp: IO[bytes], out: IO[bytes]) -> None:
    """Answer each message until told to close or the input ends.  A failed ``many`` is
    kept, and answers the next message that writes or reads (which does not run)."""
    db: sqlite3.Connection | None = None
    failed: BaseException | None = None
    while True:
        try:
            op, *args = _receive(inp)
        except EOFError:
            break
        if op == "many":
            if failed is None:
                try:
                    assert db is not None
                    db.executemany(*args)
                except Exception as exc:
                    failed = exc
            continue
        try:
            if failed is not None and op in ("execute", "script", "commit"):
                raise failed
            failed = None
            value = _run(db, op, args)
            if op == "open":
                db = value
                value = None
        except Exception as exc:
            failed = None
            _send(out, ("error", type(exc).__name__, str(exc)))
        else:
            _send(out, ("ok", value))
        if op == "close":
            return
    if db is not None:
        db.close()


def _run(db: sqlite3.Connection | None, op: str, args: list[Any]) -> Any:
    if op == "open":
        return sqlite3.connect(args[0], **args[1])
    assert db is not None
    if op == "execute":
        return db.execute(*args).fetchall()
    if op == "script":
        db.executescript(*args)
        return None
    if op == "in_transaction":
        return db.in_transaction
    if op == "close":
        return db.close()
    getattr(db, op)()  # commit, rollback
    return None


if __name__ == "__main__":
    _serve(sys.stdin.buffer, sys.stdout.buffer)
