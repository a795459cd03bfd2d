"""``sqlite3``'s errors as the node's ``StoreError`` (node/errors.py), translated here once
for the whole store: the operator's message names what failed, then SQLite's own words."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator

from node.errors import StoreError

__all__ = ["store_error", "translated"]


def store_error(what: str, exc: BaseException) -> StoreError:
    """``exc`` (an ``sqlite3.Error``, or the ``ValueError`` of a call on a closed
    ``node.store.connection.Connection``) as the store's error: ``what`` failed, and SQLite's
    reason."""
    return StoreError(f"{what}: {exc}")


@contextlib.contextmanager
def translated(what: str) -> Iterator[None]:
    """Raise an ``sqlite3.Error`` of the block as ``store_error(what, …)``."""
    try:
        yield
    except sqlite3.Error as exc:
        raise store_error(what, exc) from exc
