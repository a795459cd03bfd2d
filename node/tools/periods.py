"""The period forms each tool declares (docs/time-windows.md §Declaring period forms), checked
against the tool's input schema at start-up (``declared_periods``; a bad declaration is a
``DeclarationError`` before any call).

e_timeline: ``list``, ``intersect`` and ``traverse`` read ``start_date``/``end_date`` — as
dates in the node's zone (a bare end date includes that whole day), else as instants with an
exclusive end (a date beside an instant: no form reads the call, so its row is ``unread``);
``changes`` reads ``since``/``as_of`` as ``[since + 1 ms, as_of + 1 ms)`` (a bare date is
midnight UTC); ``find`` takes no window.  An omitted ``end_date``/``as_of`` reads as now, an
omitted ``start_date`` as 1970-01-01T00:00:00Z — and e_timeline, run at the turn's now,
closes its open ends at the same instants (``timeline_spec.closed_at``), so it runs with the
window the row records.  Facts: ``direction: past`` and the node's ``retention`` when its
config sets one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from node.tools.catalog import by_name
from node.windows.forms import Period, declare
from node.windows.spans import spell_duration

__all__ = ["EPOCH_START", "declared_periods", "timeline_declaration"]

EPOCH_START = "1970-01-01T00:00:00Z"
_READING = ["list", "intersect", "traverse"]


def _window(encoding: str, edge: str) -> dict[str, Any]:
    start = {"argument": "start_date", "as": encoding, "default": EPOCH_START}
    end = {"argument": "end_date", "as": encoding, "edge": edge, "default": "now"}
    return {"kind": "bounds", "actions": _READING, "from": start, "to": end}


_CHANGES = {
    "kind": "bounds",
    "actions": ["changes"],
    "from": {"argument": "since", "as": "iso", "edge": "exclusive", "step": "ms", "dates": True},
    "to": {
        "argument": "as_of",
        "as": "iso",
        "edge": "inclusive",
        "step": "ms",
        "dates": True,
        "default": "now",
    },
}


def timeline_declaration(retention_ms: int | None = None) -> dict[str, Any]:
    facts: dict[str, Any] = {"direction": "past"}
    if retention_ms is not None:
        facts["retention"] = spell_duration(retention_ms, "smhdw")
    forms = [_window("date", "inclusive"), _window("iso", "exclusive"), _CHANGES]
    return {"forms": forms, "facts": facts}


def declared_periods(
    retention_ms: int | None = None, extra: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, Period]:
    """Every tool's period, checked: e_timeline's, and ``extra`` (tool name → declaration)."""
    declarations = {"e_timeline": timeline_declaration(retention_ms), **(extra or {})}
    out = {}
    for tool, decl in declarations.items():
        spec = by_name(tool)
        schema = spec.input_schema if spec is not None else {}
        out[tool] = declare(tool, schema, decl)
    return out
