"""What LangGraph's stores match, as pure functions (docs/langgraph.md §Filters, §Reads):
a search's ``filter`` against an item's value, and a ``list_namespaces`` condition against a
namespace — as ``InMemoryStore`` does (``langgraph.store.memory``), except where it raises on
a value it cannot compare: there, nothing matches.

- A plain value matches by equality (Python's: ``1 == 1.0 == True``, as JSON's SQLite stores
  compare them too); a list matches a list of as many items, each matching; a dict matches a
  dict holding each of its keys with a matching value (more keys may be there).
- A dict whose keys start with ``$`` is operators, all of which must hold: ``$eq``, ``$ne``
  (a missing field is None), ``$gt``, ``$gte``, ``$lt``, ``$lte`` — numbers (booleans are
  numbers) against numbers, text against text; anything else does not match.
- A filter key names a key of the value, dots and all (SQLite's store reads ``a.b`` as a path).

``narrowing`` gives SQL what it can check of a filter first (``FieldTest``s of
node/views/item_reads.py): tests every value the filter matches passes — so SQL leaves out
only what would not match — while ``matches`` still decides each item SQL keeps.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from node.views.item_reads import FieldTest, addressable

__all__ = ["OPERATORS", "check_filter", "matches", "namespace_matches", "narrowing"]

_ORDERED: dict[str, Callable[[Any, Any], bool]] = {
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}
OPERATORS = frozenset({"$eq", "$ne", *_ORDERED})


def check_filter(filter_: Mapping[str, Any]) -> None:
    """``ValueError`` for an operator no LangGraph store knows (before anything is read)."""
    for value in filter_.values():
        if isinstance(value, Mapping):
            if any(str(k).startswith("$") for k in value):
                unknown = sorted(str(k) for k in value if k not in OPERATORS)
                if unknown:
                    raise ValueError(f"Unsupported operator: {unknown[0]}")
            else:
                check_filter(value)


def matches(value: Mapping[str, Any], filter_: Mapping[str, Any]) -> bool:
    """Whether an item's ``value`` passes ``filter_``."""
    return all(_compare(value.get(k), f) for k, f in filter_.items())


def _compare(item: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_apply(item, op, v) for op, v in wanted.items())
        return isinstance(item, Mapping) and all(
            _compare(item.get(k), v) for k, v in wanted.items()
        )
    if isinstance(wanted, list | tuple):
        return (
            isinstance(item, list | tuple)
            and len(item) == len(wanted)
            and all(_compare(i, w) for i, w in zip(item, wanted, strict=True))
        )
    return bool(item == wanted)


def _apply(item: Any, op: str, wanted: Any) -> bool:
    if op == "$eq":
        return bool(item == wanted)
    if op == "$ne":
        return bool(item != wanted)
    compare = _ORDERED[op]
    if _number(item) and _number(wanted):
        return compare(float(item), float(wanted))
    if isinstance(item, str) and isinstance(wanted, str):
        return compare(item, wanted)
    return False


def _number(x: Any) -> bool:
    return isinstance(x, int | float)


# SQLite reads the JSON's numbers with its own parser, and compares integers past 2**53 exactly
# where Python compares them as floats: a number's tests are widened by this much of it (and
# by as much again), so none leaves out what Python matches.
_SLACK = 1e-9
_SQL_OP = {"$eq": "=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def narrowing(filter_: Mapping[str, Any]) -> list[FieldTest]:
    """Tests on the value's fields that every value ``filter_`` matches passes: equality and
    order against text or a finite number, of a key a JSON path can name (anything else —
    ``$ne``, None, a list or dict, a key JSON escapes — is left to ``matches`` alone)."""
    out: list[FieldTest] = []
    for key, wanted in filter_.items():
        if not isinstance(key, str) or not addressable(key):
            continue
        if isinstance(wanted, Mapping):
            if any(str(k).startswith("$") for k in wanted):
                out += [t for op, v in wanted.items() for t in _narrowed(key, op, v)]
        else:
            out += _narrowed(key, "$eq", wanted)
    return out


def _narrowed(key: str, op: str, wanted: Any) -> list[FieldTest]:
    if op not in _SQL_OP:
        return []  # $ne: a missing field matches it
    if isinstance(wanted, str):
        return [FieldTest(key, _SQL_OP[op], wanted)] if _bindable(wanted) else []
    if not _number(wanted):
        return []
    try:
        x = float(wanted)
    except OverflowError:
        return []
    if not math.isfinite(x):
        return []
    slack = abs(x) * _SLACK + _SLACK
    low, high = FieldTest(key, ">=", x - slack), FieldTest(key, "<=", x + slack)
    return {"$eq": [low, high], "$gt": [low], "$gte": [low]}.get(op, [high])


def _bindable(text: str) -> bool:
    """Text SQLite holds as Python does: UTF-8 (no lone surrogate), no NUL."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return "\0" not in text


def namespace_matches(kind: str, path: Sequence[str], namespace: Sequence[str]) -> bool:
    """Whether ``namespace`` starts (``prefix``) or ends (``suffix``) with ``path``, where a
    ``*`` label matches any one label."""
    if len(namespace) < len(path):
        return False
    if kind == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif kind == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"Unsupported match type: {kind}")
    return all(p in ("*", n) for n, p in pairs)
