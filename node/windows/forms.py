"""Period declarations (docs/time-windows.md §Declaring period forms): the forms a tool's
period arguments take, in preference order, and the tool's facts — checked once, at start-up.

A declaration is a plain mapping, as a tool author writes it::

    {"forms": [{"kind": "bounds", "actions": ["list"],
                "from": {"argument": "start_date", "as": "date", "default": "1970-01-01T00:00:00Z"},
                "to": {"argument": "end_date", "as": "date", "edge": "inclusive",
                       "default": "now"}}],
     "facts": {"direction": "past", "retention": "30d"}}

or the sugar ``{"argument", "spelling" | "accepts", "zoneArgument"}``.  memlane's additions: a
form's ``actions`` (the tool actions it applies to; absent = every call), a bound's
``default`` (``"now"`` or an instant: the argument may then be left out), a bound's
``step: "ms"`` (its edge moves by 1 ms whatever precision the value is written in), a
``from.edge: "exclusive"`` (only with ``step: "ms"``) and ``dates: true`` on an ``iso`` bound
(a bare ``YYYY-MM-DD`` is midnight UTC).  ``declare`` raises ``DeclarationError`` naming the
tool, the form and the rule broken.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from node.windows.errors import DeclarationError
from node.windows.spans import parse_duration
from protocol.timefmt import TimeFormatError, parse_instant

__all__ = [
    "ENCODINGS",
    "KINDS",
    "Bound",
    "Facts",
    "Form",
    "Period",
    "declare",
    "form_facts",
    "form_max_range",
    "tool_facts",
]

KINDS = ("bounds", "joined", "object", "day", "lookback")
ENCODINGS = ("iso", "epoch-ms", "epoch-s", "date", "wall")
_DIRECTIONS = ("past", "future", "any")
_SUGAR = {"lookback", "signed-lookback", "iso-range", "wall-range"}
_KEYS = {
    "bounds": {"kind", "from", "to", "zone", "maxRange", "actions"},
    "joined": {"kind", "argument", "as", "joiner", "edge", "zone", "maxRange", "actions"},
    "object": {"kind", "argument", "keys", "as", "edge", "zone", "maxRange", "actions"},
    "day": {"kind", "argument", "zone", "maxRange", "actions"},
    "lookback": {"kind", "argument", "signed", "units", "maxRange", "actions"},
}
_BOUND_KEYS = {"argument", "as", "edge", "default", "step", "dates"}
_FACT_KEYS = {"direction", "retention", "maxRange", "granularity", "filtersToAsked"}


@dataclass(frozen=True, slots=True)
class Bound:
    """One end of a range: its argument (None inside a joined or object value), encoding,
    edge, and memlane's default and step."""

    argument: str | None
    encoding: str
    edge: str = "inclusive"
    default: str | None = None  # "now" or a strict instant
    ms_step: bool = False
    dates: bool = False


@dataclass(frozen=True, slots=True)
class Form:
    kind: str
    argument: str | None = None  # joined, object, day, lookback
    lower: Bound | None = None  # bounds, joined, object
    upper: Bound | None = None
    joiner: str = ".."
    keys: tuple[str, str] = ("from", "to")
    zone_argument: str | None = None
    signed: bool = False
    units: str = "mhdw"
    max_range: int | None = None
    actions: frozenset[str] | None = None

    def arguments(self) -> tuple[str, ...]:
        """Its non-zone arguments."""
        if self.kind == "bounds":
            assert self.lower is not None
            assert self.upper is not None
            return (str(self.lower.argument), str(self.upper.argument))
        return (str(self.argument),)

    def needs_zone(self) -> bool:
        ends = (self.lower, self.upper)
        return self.kind == "day" or any(b and b.encoding in ("date", "wall") for b in ends)


@dataclass(frozen=True, slots=True)
class Facts:
    """What the tool says of itself (never policy); None: not checked."""

    direction: str | None = None
    retention: int | None = None
    max_range: int | None = None
    granularity: int | None = None
    filters_to_asked: bool = False

    @property
    def granularity_ms(self) -> int:
        return self.granularity or 60_000


@dataclass(frozen=True, slots=True)
class Period:
    forms: tuple[Form, ...]
    facts: Facts

    def forms_for(self, action: Any) -> tuple[Form, ...]:
        """The forms of a call with this action, in order (a form's ``actions`` name the
        actions it applies to: docs/time-windows.md §Declaring period forms)."""
        named = action if isinstance(action, str) else None
        return tuple(f for f in self.forms if f.actions is None or named in f.actions)


def form_max_range(form: Form, facts: Facts) -> int | None:
    return form.max_range if form.max_range is not None else facts.max_range


def form_facts(form: Form, facts: Facts) -> Facts:
    return replace(facts, max_range=form_max_range(form, facts))


def tool_facts(forms: Sequence[Form], facts: Facts) -> Facts:
    """The facts as declared if no form has its own cap; else the widest cap, or none when
    some form is uncapped (form-max-range.test.ts)."""
    if all(f.max_range is None for f in forms):
        return facts
    caps = [form_max_range(f, facts) for f in forms]
    widest = None if any(c is None for c in caps) else max(c for c in caps if c is not None)
    return replace(facts, max_range=widest)


# -- declaring ---------------------------------------------------------------------------------


class _Checker:
    """Reads one tool's declaration against its input schema, collecting the first problem."""

    def __init__(self, tool: str, schema: Mapping[str, Any]) -> None:
        self.tool = tool
        self.properties: Mapping[str, Any] = schema.get("properties", {})
        action = self.properties.get("action", {})
        self.actions = tuple(action.get("enum", ())) if isinstance(action, Mapping) else ()
        self.where = "period"

    def fail(self, rule: str) -> DeclarationError:
        return DeclarationError(f"{self.tool}: {self.where}: {rule}")

    def keys(self, value: Any, allowed: set[str], what: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(f"{what} must be an object")
        unknown = sorted(set(value) - allowed)
        if unknown:
            raise self.fail(f"{what} does not take {', '.join(unknown)}")
        return value

    def argument(self, name: Any, encoding: str | None) -> str:
        """An argument of the input schema of the type its encoding needs."""
        if not isinstance(name, str) or name not in self.properties:
            raise self.fail(f"argument {name!r} is not in the tool's input schema")
        declared = self.properties[name].get("type")
        types = set(declared) if isinstance(declared, list) else {declared}
        epoch = encoding in ("epoch-ms", "epoch-s")
        wanted = {"number", "integer"} if epoch else {"string"}
        if not types & wanted:
            kind = "a number (epoch-ms, epoch-s)" if epoch else "a string"
            raise self.fail(f"argument {name!r} must be {kind}")
        return name

    def duration(self, value: Any, what: str) -> int:
        ms = parse_duration(value)
        if ms is None:
            raise self.fail(f"{what} must be a duration like 30s, 5m, 2h, 1d or 1w")
        return ms

    def encoding(self, value: Any) -> str:
        if value not in ENCODINGS:
            raise self.fail(f"as must be one of {', '.join(ENCODINGS)}")
        return str(value)

    def edge(self, value: Any, what: str) -> str:
        if value not in ("inclusive", "exclusive"):
            raise self.fail(f"{what} must be inclusive or exclusive")
        return str(value)

    def zone(self, value: Any) -> str | None:
        if value is None:
            return None
        return self.argument(self.keys(value, {"argument"}, "zone").get("argument"), None)

    def bound(self, value: Any, end: str) -> Bound:
        raw = self.keys(value, _BOUND_KEYS, end)
        encoding = self.encoding(raw.get("as"))
        if end == "to" and "edge" not in raw:
            raise self.fail("to.edge is required")
        ms_step = raw.get("step") == "ms"
        if "step" in raw and not ms_step:
            raise self.fail(f'{end}.step may only be "ms"')
        edge = self.edge(raw.get("edge", "inclusive"), f"{end}.edge")
        if end == "from" and edge == "exclusive" and not ms_step:
            raise self.fail('from.edge may only be inclusive (or exclusive with step "ms")')
        dates = raw.get("dates", False)
        if type(dates) is not bool or (dates and encoding != "iso"):
            raise self.fail(f"{end}.dates is true or false, and only for as: iso")
        return Bound(
            self.argument(raw.get("argument"), encoding),
            encoding,
            edge,
            self.default(raw.get("default"), end),
            ms_step,
            dates,
        )

    def default(self, value: Any, end: str) -> str | None:
        if value is None or value == "now":
            return None if value is None else "now"
        try:
            parse_instant(value)
        except TimeFormatError as exc:
            raise self.fail(f'{end}.default must be "now" or an ISO-8601 instant') from exc
        return str(value)

    def actions_of(self, value: Any) -> frozenset[str] | None:
        if value is None:
            return None
        if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
            raise self.fail("actions must be a non-empty list of the tool's actions")
        unknown = sorted(set(value) - set(self.actions))
        if unknown:
            raise self.fail(f"actions {', '.join(unknown)} are not actions of the tool")
        return frozenset(value)

    def form(self, raw: Any) -> Form:
        kind = raw.get("kind") if isinstance(raw, Mapping) else None
        if kind not in KINDS:
            raise self.fail(f"kind must be one of {', '.join(KINDS)}")
        raw = self.keys(raw, _KEYS[kind], "the form")
        cap = None if "maxRange" not in raw else self.duration(raw["maxRange"], "maxRange")
        actions = self.actions_of(raw.get("actions"))
        return replace(_BUILD[kind](self, raw), max_range=cap, actions=actions)


def _bounds(c: _Checker, raw: Mapping[str, Any]) -> Form:
    lower, upper = c.bound(raw.get("from"), "from"), c.bound(raw.get("to"), "to")
    if lower.argument == upper.argument:
        raise c.fail("from and to must name different arguments")
    return Form("bounds", lower=lower, upper=upper, zone_argument=c.zone(raw.get("zone")))


def _joined(c: _Checker, raw: Mapping[str, Any]) -> Form:
    encoding = c.encoding(raw.get("as"))
    if raw.get("joiner") not in ("..", "/"):
        raise c.fail('joiner must be ".." or "/"')
    edge = c.edge(raw.get("edge", "inclusive"), "edge")
    return Form(
        "joined",
        c.argument(raw.get("argument"), "joined"),
        Bound(None, encoding),
        Bound(None, encoding, edge),
        joiner=str(raw["joiner"]),
        zone_argument=c.zone(raw.get("zone")),
    )


def _object(c: _Checker, raw: Mapping[str, Any]) -> Form:
    encoding = c.encoding(raw.get("as"))
    keys = c.keys(raw.get("keys"), {"from", "to"}, "keys")
    names = (keys.get("from"), keys.get("to"))
    if not all(isinstance(n, str) and n for n in names) or names[0] == names[1]:
        raise c.fail("keys must name two different keys, from and to")
    if "edge" not in raw:
        raise c.fail("edge is required")
    edge = c.edge(raw["edge"], "edge")
    argument = raw.get("argument")
    if not isinstance(argument, str) or argument not in c.properties:
        raise c.fail(f"argument {argument!r} is not in the tool's input schema")
    return Form(
        "object",
        argument,
        Bound(None, encoding),
        Bound(None, encoding, edge),
        keys=(str(names[0]), str(names[1])),
        zone_argument=c.zone(raw.get("zone")),
    )


def _day(c: _Checker, raw: Mapping[str, Any]) -> Form:
    zone = c.zone(raw.get("zone"))
    return Form("day", c.argument(raw.get("argument"), "day"), zone_argument=zone)


def _lookback(c: _Checker, raw: Mapping[str, Any]) -> Form:
    signed, units = raw.get("signed"), raw.get("units", "mhdw")
    if type(signed) is not bool:
        raise c.fail("signed must be true or false")
    if isinstance(units, list):
        units = "".join(u for u in units if isinstance(u, str))
    distinct = isinstance(units, str) and len(set(units)) == len(units)
    if not units or not distinct or set(units) - set("smhdw"):
        raise c.fail("units must be distinct letters of smhdw")
    return Form("lookback", c.argument(raw.get("argument"), "lookback"), signed=signed, units=units)


_BUILD = {
    "bounds": _bounds,
    "joined": _joined,
    "object": _object,
    "day": _day,
    "lookback": _lookback,
}


def _sugar(spelling: Any, argument: Any, zone_argument: Any) -> dict[str, Any]:
    if spelling not in _SUGAR:
        raise ValueError(spelling)
    if spelling in ("lookback", "signed-lookback"):
        return {"kind": "lookback", "argument": argument, "signed": spelling != "lookback"}
    form = {
        "kind": "joined",
        "argument": argument,
        "joiner": "..",
        "edge": "inclusive",
        "as": "iso" if spelling == "iso-range" else "wall",
    }
    if spelling == "wall-range":
        form["zone"] = {"argument": zone_argument}
    return form


def _expand(c: _Checker, decl: Mapping[str, Any]) -> list[Any]:
    sugar = {"argument", "spelling", "accepts", "zoneArgument"} & set(decl)
    if sugar and "forms" in decl:
        raise c.fail("declare either forms or the sugar (argument, spelling/accepts), not both")
    if not sugar:
        forms = decl.get("forms", [])
        if not isinstance(forms, list):
            raise c.fail("forms must be a list")
        return forms
    spellings = decl.get("accepts", [decl["spelling"]] if "spelling" in decl else [])
    try:
        return [_sugar(s, decl.get("argument"), decl.get("zoneArgument")) for s in spellings]
    except ValueError as exc:
        raise c.fail(f"spelling {exc} is not one of {', '.join(sorted(_SUGAR))}") from exc


def _facts(c: _Checker, raw: Any) -> Facts:
    raw = c.keys(raw if raw is not None else {}, _FACT_KEYS, "facts")
    if raw.get("direction", "any") not in _DIRECTIONS:
        raise c.fail(f"facts.direction must be one of {', '.join(_DIRECTIONS)}")
    if type(raw.get("filtersToAsked", False)) is not bool:
        raise c.fail("facts.filtersToAsked must be true or false")
    spans = {
        k: c.duration(raw[k], f"facts.{k}") if k in raw else None
        for k in ("retention", "maxRange", "granularity")
    }
    return Facts(
        raw.get("direction"),
        spans["retention"],
        spans["maxRange"],
        spans["granularity"],
        raw.get("filtersToAsked", False),
    )


def declare(tool: str, schema: Mapping[str, Any], decl: Mapping[str, Any]) -> Period:
    """Check a declaration against the tool's input schema; ``DeclarationError`` if any
    rule is broken."""
    c = _Checker(tool, schema)
    raw = c.keys(
        decl,
        {"forms", "facts", "argument", "spelling", "accepts", "zoneArgument"},
        "the declaration",
    )
    forms = []
    for i, item in enumerate(_expand(c, raw)):
        c.where = f"form {i}"
        forms.append(c.form(item))
    c.where = "period"
    return Period(tuple(forms), _facts(c, raw.get("facts")))
