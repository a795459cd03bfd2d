"""The read rule, written once (docs/authority.md §The read rule).

A caller can read an SR when its token has read scope, the SR is in the token's workspace,
and the SR is not private — or the caller is its owner, or holds ``admin:workspace``.  Here
it is for one SR's columns, and as SQL over the SR view's rows: the current state (``srs``,
and its narrow copy ``sr_docs``), which adds that the SR is shown at this moment and not
deleted here, and the per-reader-scope statistics (``sr_stats``), one row per (workspace,
private, owner).  Every view filters with it before it counts, ranks or pages.
"""

from __future__ import annotations

from node.access.callers import Caller

__all__ = ["may_read_sr", "readable_scopes", "readable_srs"]

_NOTHING: tuple[str, tuple[str, ...]] = ("0", ())


def may_read_sr(caller: Caller, workspace: str, owner: str, private: bool) -> bool:
    """Whether ``caller`` may read an SR of ``workspace``, ``owner`` and privacy."""
    return (
        caller.has("read:workspace")
        and workspace == caller.workspace
        and (not private or owner == caller.principal or caller.is_admin)
    )


def readable_srs(caller: Caller, table: str = "srs") -> tuple[str, tuple[str, ...]]:
    """The rule as a predicate over ``table``'s rows (``srs`` or ``sr_docs``, as named in
    the query), with its parameters: shown at this moment, not deleted here, readable."""
    if not caller.has("read:workspace"):
        return _NOTHING
    scope, params = _scope(caller, f"{table}.")
    return f"{table}.live = 1 AND {table}.deleted = 0 AND {scope}", params


def readable_scopes(caller: Caller) -> tuple[str, tuple[str, ...]]:
    """The rule as a predicate over ``sr_stats`` rows, with its parameters: the reader
    scopes whose SRs ``caller`` may read."""
    if not caller.has("read:workspace"):
        return _NOTHING
    return _scope(caller, "")


def _scope(caller: Caller, prefix: str) -> tuple[str, tuple[str, ...]]:
    """The workspace and privacy part, for a caller with read scope."""
    where = f"{prefix}workspace = ?"
    if caller.is_admin:
        return where, (caller.workspace,)
    return f"{where} AND ({prefix}private = 0 OR {prefix}owner = ?)", (
        caller.workspace,
        caller.principal,
    )
