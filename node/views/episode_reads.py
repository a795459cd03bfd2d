"""Reading episodes under the reader contract (docs/tools/work_episode_chain.md): the chain
walk and the list; and who may read an episode, for the audit feed.

An episode passes when it is not forgotten (``blocked``), its ``ts`` has come, it has not
expired, and it is in the caller's vault and — unless ``any_caller`` — the caller's own.
``walk`` follows ``prev_id`` and stops at the first episode that does not pass; ``page`` lists
the passing episodes newest first.  Either way a ``prev_id`` is shown only when the episode it
names passes too.

A walk reads one range first: the start's caller's episodes up to the start, newest first.
``episodes`` is clustered by ``(vault, caller, ts, ord)``, so that range is a few contiguous
pages, and a caller's chain normally runs through it in order (each ``prev_id`` names the
caller's newest episode known to the recording node).  When the chain leaves the range (another
caller's episode, one recorded on another node, a ``prev_id`` naming a later episode), the walk
is read again as one recursive query, one keyed lookup a hop.  Either read is one statement, so the
answer is one committed state's, and the same either way.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from node.access.callers import Caller
from node.store import Reader

__all__ = [
    "COLUMNS",
    "Filters",
    "Scope",
    "columns_of",
    "page",
    "select_episode_readers",
    "shown_episode",
    "walk",
]

# The chain fields, in the order of the tool's specification (docs/tools/work_episode_chain.md
# §Each episode (detailed); ``tags`` is JSON text, ``blocked`` an integer).
COLUMNS = (
    "id",
    "ts",
    "vault",
    "session_id",
    "caller",
    "channel",
    "episode_type",
    "task_result",
    "verdict_at",
    "tool",
    "status",
    "error_code",
    "duration_ms",
    "result_size",
    "summary",
    "tags",
    "trust",
    "eligibility",
    "blocked",
    "prev_id",
)


@dataclass(frozen=True, slots=True)
class Scope:
    """Whose episodes pass, at which moment."""

    caller: Caller
    any_caller: bool
    moment: int

    def args(self) -> dict[str, Any]:
        return {
            "vault": self.caller.workspace,
            "principal": self.caller.principal,
            "moment": self.moment,
        }

    def passes(self, e: str) -> str:
        """SQL: the episode row ``e`` passes (written out per case, so the planner sees
        which index serves it)."""
        whose = "" if self.any_caller else f" AND {e}.caller = :principal"
        return (
            f"({e}.blocked = 0 AND {e}.ts <= :moment "
            f"AND ({e}.expires_at IS NULL OR {e}.expires_at > :moment) "
            f"AND {e}.vault = :vault{whose})"
        )


def columns_of(e: str) -> str:
    """SQL: the ``COLUMNS`` of the episode row ``e``, in their order."""
    return ", ".join(f"{e}.{c}" for c in COLUMNS)


# Rows past the k + 1 a walk reads: room for a few of the caller's episodes off the chain.
_SLACK = 8


def _range(scope: Scope) -> str:
    """The start's caller's episodes with ``ts`` up to the start's, newest first, each with
    whether it passes: the rows a chain normally runs through."""
    passes, columns = scope.passes("e"), columns_of("e")
    start = "(SELECT {} FROM episodes WHERE vault = :vault AND id = :id)"
    return (
        f"SELECT {passes}, {columns} FROM episodes e WHERE e.vault = :vault "  # noqa: S608
        f"AND e.caller = {start.format('caller')} AND e.ts <= {start.format('ts')} "
        "ORDER BY e.ts DESC, e.ord DESC LIMIT :n"
    )


def _walk(scope: Scope) -> str:
    """Each step reads one episode by its id; ``ok`` says whether it passes, and only a
    passing one is followed.  ``n`` runs to ``k``: the row after the k-th tells whether more
    passes."""
    passes, columns = scope.passes("e"), columns_of("e")
    return (
        f"WITH RECURSIVE walk(n, ok, {', '.join(COLUMNS)}) AS ("  # noqa: S608
        f"SELECT 0, {passes}, {columns} FROM episodes e WHERE e.vault = :vault AND e.id = :id "
        f"UNION ALL SELECT w.n + 1, {passes}, {columns} FROM walk w CROSS JOIN episodes e "
        "ON e.vault = :vault AND e.id = w.prev_id WHERE w.ok AND w.n < :k"
        f") SELECT ok, {', '.join(COLUMNS)} FROM walk"
    )


def _follow(rows: list[Any], start: str, k: int) -> list[Any] | None:
    """The rows ``_walk`` would give, found in ``rows`` (a ``_range``); None when a hop
    leads outside them.  No rows: the start is not in the vault."""
    if not rows:
        return []
    by_id = {row[1]: row for row in rows}
    hops: list[Any] = []
    step: str | None = start
    while (row := by_id.get(step)) is not None:
        hops.append(row)
        step = row[-1]
        if not row[0] or len(hops) > k or step is None:
            return hops
    return None


@lru_cache(maxsize=4096)
def _tags(text: str) -> tuple[str, ...]:
    """A stored tag list (JSON text); episodes share a few sets, so each is parsed once."""
    return tuple(json.loads(text))


def shown_episode(row: Any, prev_shown: bool) -> dict[str, Any]:
    """An episode row (``COLUMNS``) as the tools show it; its ``prev_id`` only when
    ``prev_shown``."""
    out = dict(zip(COLUMNS, row, strict=True))
    out["tags"] = list(_tags(out["tags"]))
    out["blocked"] = bool(out["blocked"])
    if not prev_shown:
        out["prev_id"] = None
    return out


async def walk(
    reader: Reader, scope: Scope, start: str, k: int
) -> tuple[list[dict[str, Any]], bool] | None:
    """The chain from ``start``, newest first, and whether it stopped at ``k`` with more
    behind; None when ``start`` does not pass (hidden and unknown alike).  A walk that comes
    back to an episode it showed (a cycle) ends there."""
    args = scope.args() | {"id": start, "k": k}
    hops = _follow(await reader.fetchall(_range(scope), args | {"n": k + 1 + _SLACK}), start, k)
    if hops is None:
        hops = await reader.fetchall(_walk(scope), args)
    return _chain(hops, k)


def _chain(hops: list[Any], k: int) -> tuple[list[dict[str, Any]], bool] | None:
    """The episodes shown from a walk's rows (``ok`` and the columns, in walk order)."""
    kept: list[Any] = []
    seen: set[str] = set()
    after: Any = None  # the row past the last one kept
    for row in hops:
        ok, episode = row[0], row[1:]
        if not ok or episode[0] in seen or len(kept) == k:
            after = row
            break
        kept.append(episode)
        seen.add(episode[0])
    if not kept:
        return None
    followed = after is not None and bool(after[0])
    truncated = followed and after[1] not in seen
    chain = [shown_episode(e, True) for e in kept[:-1]] + [shown_episode(kept[-1], followed)]
    return chain, truncated


@dataclass(frozen=True, slots=True)
class Filters:
    since: int | None = None
    until: int | None = None
    status: str | None = None
    tool: str | None = None
    tags: tuple[str, ...] = ()


async def page(
    reader: Reader, scope: Scope, filters: Filters, number: int, size: int
) -> tuple[list[dict[str, Any]], bool]:
    """One page of the passing episodes, newest first, and whether more follow."""
    where, args = [scope.passes("e")], scope.args()
    for name, op in (("since", ">="), ("until", "<")):
        if getattr(filters, name) is not None:
            where.append(f"e.ts {op} :{name}")
            args[name] = getattr(filters, name)
    for name in ("status", "tool"):
        if getattr(filters, name) is not None:
            where.append(f"e.{name} = :{name}")
            args[name] = getattr(filters, name)
    for i, tag in enumerate(filters.tags):
        where.append(f"EXISTS (SELECT 1 FROM json_each(e.tags) WHERE value = :tag{i})")  # noqa: S608
        args[f"tag{i}"] = tag
    rows = await reader.fetchall(
        f"SELECT {columns_of('e')}, {scope.passes('p')} FROM episodes e "  # noqa: S608
        "LEFT JOIN episodes p ON p.vault = e.vault AND p.id = e.prev_id "
        f"WHERE {' AND '.join(where)} ORDER BY e.ts DESC, e.ord DESC "
        "LIMIT :limit OFFSET :offset",
        args | {"limit": size + 1, "offset": (number - 1) * size},
    )
    return [shown_episode(r[:-1], bool(r[-1])) for r in rows[:size]], len(rows) > size


_READERS = "SELECT id, vault, caller, 0 FROM episodes WHERE vault = ? AND id IN ({})"


async def select_episode_readers(
    reader: Reader, vault: str, ids: Sequence[str]
) -> dict[str, tuple[Any, ...]]:
    """Of ``ids`` (one statement's worth), each episode of ``vault`` with its vault and
    caller — forgotten or not, its time come or not."""
    rows = await reader.fetchall(_READERS.format(",".join("?" * len(ids))), [vault, *ids])
    return {row[0]: tuple(row[1:]) for row in rows}
