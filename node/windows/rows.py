"""The CallWindowRow (docs/time-windows.md §The row): which window one call carries.

``wire`` spells a row with the CallWindowRow's field names, verbatim (camelCase), leaving out
what a ``how`` does not carry, so rows interoperate with every tool that reads them;
``from_wire`` reads one back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from node.windows.spans import TimeSpan, parse_span

__all__ = ["HOWS", "CallWindowRow", "Person", "from_wire"]

HOWS = ("refused", "model", "filled", "bound", "model-chosen", "unread", "not-filled")
_FLAGS = ("rounded", "trimmedByTool", "partlyBeyondRetention")


@dataclass(frozen=True, slots=True)
class Person:
    """The person's window a row names: its range (with its own offsets) and source."""

    span: TimeSpan
    source: str
    mention: int | None = None  # present exactly when source is not "control"

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = self.span.wire() | {"source": self.source}
        if self.mention is not None:
            out["mention"] = self.mention
        return out


@dataclass(frozen=True, slots=True)
class CallWindowRow:
    turn: int
    iteration: int
    tool_call_id: str
    tool_name: str
    how: str
    form: int | None = None
    asked: TimeSpan | None = None
    person: Person | None = None
    by: str | None = None
    rounded: bool = False
    sent: TimeSpan | None = None
    extra: tuple[TimeSpan, ...] = ()  # differs.extra
    trimmed_by_tool: bool = False
    partly_beyond_retention: bool = False
    why: str | None = None
    refused: str | None = None
    argument: str | None = None

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "call-window",
            "turn": self.turn,
            "iteration": self.iteration,
            "toolCallId": self.tool_call_id,
            "toolName": self.tool_name,
            "how": self.how,
        }
        optional = {
            "form": self.form,
            "asked": self.asked.wire() if self.asked else None,
            "person": self.person.wire() if self.person else None,
            "by": self.by,
            "sent": self.sent.wire() if self.sent else None,
            "differs": {"extra": [s.wire() for s in self.extra]} if self.extra else None,
            "why": self.why,
            "refused": self.refused,
            "argument": self.argument,
        }
        out |= {k: v for k, v in optional.items() if v is not None}
        flags = (self.rounded, self.trimmed_by_tool, self.partly_beyond_retention)
        out |= {name: True for name, on in zip(_FLAGS, flags, strict=True) if on}
        return out


def _person(raw: Mapping[str, Any]) -> Person:
    span = parse_span({"from": raw["from"], "to": raw["to"]}, "person")
    return Person(span, str(raw["source"]), raw.get("mention"))


def from_wire(raw: Mapping[str, Any]) -> CallWindowRow:
    """A row as ``wire`` spelled it (as the ``call.window`` kind validated it)."""
    spans = {k: parse_span(raw[k], k) if k in raw else None for k in ("asked", "sent")}
    extra = tuple(parse_span(s, "extra") for s in raw.get("differs", {}).get("extra", ()))
    return CallWindowRow(
        raw["turn"],
        raw["iteration"],
        raw["toolCallId"],
        raw["toolName"],
        raw["how"],
        form=raw.get("form"),
        asked=spans["asked"],
        person=_person(raw["person"]) if "person" in raw else None,
        by=raw.get("by"),
        rounded=bool(raw.get("rounded")),
        sent=spans["sent"],
        extra=extra,
        trimmed_by_tool=bool(raw.get("trimmedByTool")),
        partly_beyond_retention=bool(raw.get("partlyBeyondRetention")),
        why=raw.get("why"),
        refused=raw.get("refused"),
        argument=raw.get("argument"),
    )
