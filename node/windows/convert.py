"""A window → argument values, and ``convert_for_tool``, the one answer of a fill
(docs/time-windows.md §What the node decides, *Left out*): the first form that holds the
window exactly, else the first ``day``/``lookback`` form whose read is wider, else a refusal
code.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

from node.windows.facts import fact_problem, partly_beyond_retention
from node.windows.forms import Bound, Facts, Form, form_max_range, tool_facts
from node.windows.spans import UNIT_MS, TimeSpan, ceil_to, lookback_range, spell_duration
from node.windows.zones import date_of, midnights, read_wall, wall_of
from protocol.timefmt import format_instant

__all__ = [
    "Conversion",
    "Ctx",
    "convert_exact",
    "convert_for_tool",
    "convert_widened",
    "write_bound",
]


@dataclass(frozen=True, slots=True)
class Ctx:
    """The moment and zones a conversion runs under: the turn's ``now`` (and the offset it
    was written in), the window's zone, the node's (app) zone, the tool's granularity."""

    now: int
    zone: ZoneInfo | None
    app_zone: ZoneInfo | None = None
    now_offset: int = 0
    granularity: int = 60_000


@dataclass(frozen=True, slots=True)
class Conversion:
    form: int
    values: dict[str, Any]
    rounded: bool = False
    sent: TimeSpan | None = None  # a widened read: the range the tool reads
    extra: tuple[TimeSpan, ...] = ()
    partly_beyond_retention: bool = False


Values = tuple[dict[str, Any], bool]  # the argument values, and whether a bound moved


def _zone(form: Form, ctx: Ctx) -> ZoneInfo | None:
    return ctx.zone if form.zone_argument is not None else ctx.app_zone


def _with_zone(values: dict[str, Any], form: Form, ctx: Ctx) -> dict[str, Any]:
    if form.zone_argument is not None and ctx.zone is not None:
        values[form.zone_argument] = ctx.zone.key
    return values


def _iso_text(t: int, offset: int, fraction: bool) -> str:
    text = format_instant(t, offset)
    if fraction and "." not in text[:20]:
        text = text[:19] + ".000" + text[19:]
    return text


def _wall_text(t: int, zone: ZoneInfo, step: int) -> str | None:
    wall = wall_of(t, zone)
    if read_wall(wall, zone) != (t,):
        return None  # a doubled hour: not exact
    text = wall.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}.{wall.microsecond // 1000:03d}" if step == 1 else text


def _date_text(ms: int, zone: ZoneInfo, upper_inclusive: bool) -> str | None:
    day = date_of(ms, zone)
    if midnights(day, zone) != (ms,):
        return None
    return (day - timedelta(days=1) if upper_inclusive else day).isoformat()


def _epoch_s(ms: int, upper: bool, moves: bool) -> int:
    if upper:
        return -(-ms // 1000) - (1 if moves else 0)
    return ms // 1000 - (1 if moves else 0)


def write_bound(
    bound: Bound, ms: int, offset: int, zone: ZoneInfo | None, *, upper: bool
) -> tuple[Any, bool] | None:
    """One end's value (and whether it moved), or None when it cannot be written exactly."""
    moves = bound.edge == ("inclusive" if upper else "exclusive")
    enc = bound.encoding
    if enc == "epoch-ms":
        return (ms - 1 if moves else ms), False
    if enc == "epoch-s":
        return _epoch_s(ms, upper, moves), ms % 1000 != 0
    if zone is None and enc in ("wall", "date"):
        return None
    if enc == "date":
        assert zone is not None
        return None if moves and not upper else (_date_text(ms, zone, moves), False)
    step = 1 if bound.ms_step or ms % 1000 else 1000
    t = ms - step if moves else ms
    if enc == "iso":
        return _iso_text(
            t, offset, moves and step == 1 and not bound.ms_step and t % 1000 == 0
        ), False
    assert zone is not None
    return _wall_text(t, zone, step), False


def _pairs(form: Form, span: TimeSpan, ctx: Ctx) -> tuple[Any, Any, bool] | None:
    zone = _zone(form, ctx)
    assert form.lower is not None
    assert form.upper is not None
    a = write_bound(form.lower, span.start, span.start_offset, zone, upper=False)
    b = write_bound(form.upper, span.end, span.end_offset, zone, upper=True)
    if a is None or b is None or a[0] is None or b[0] is None:
        return None
    return a[0], b[0], a[1] or b[1]


def _ranged(form: Form, span: TimeSpan, ctx: Ctx) -> Values | None:
    pair = _pairs(form, span, ctx)
    if pair is None:
        return None
    a, b, rounded = pair
    if form.kind == "bounds":
        assert form.lower is not None
        assert form.upper is not None
        values = {str(form.lower.argument): a, str(form.upper.argument): b}
    elif form.kind == "joined":
        values = {str(form.argument): f"{a}{form.joiner}{b}"}
    else:
        values = {str(form.argument): {form.keys[0]: a, form.keys[1]: b}}
    return _with_zone(values, form, ctx), rounded


def _finest(units: str) -> int:
    return min(UNIT_MS[u] for u in units)


def _lookback(form: Form, span: TimeSpan, lookback: int | None, ctx: Ctx) -> Values | None:
    sign = "-" if form.signed else ""
    if lookback is not None:
        text = spell_duration(lookback, form.units)
        return None if text is None else ({str(form.argument): sign + text}, False)
    need = ctx.now - span.start
    if abs(span.end - ctx.now) > ctx.granularity or need <= 0:
        return None
    length = ceil_to(need, _finest(form.units))
    text = spell_duration(length, form.units)
    if text is None:
        return None
    rounded = length != need or span.end not in (ctx.now, ctx.now + 1)
    return {str(form.argument): sign + text}, rounded


def _day(form: Form, span: TimeSpan, ctx: Ctx) -> Values | None:
    zone = _zone(form, ctx)
    if zone is None:
        return None
    day = date_of(span.start, zone)
    after = midnights(day + timedelta(days=1), zone)
    if midnights(day, zone) != (span.start,) or after != (span.end,):
        return None
    return _with_zone({str(form.argument): day.isoformat()}, form, ctx), False


def convert_exact(form: Form, span: TimeSpan, lookback: int | None, ctx: Ctx) -> Values | None:
    """The values that hold the window exactly under ``form``, or None."""
    if form.kind == "lookback":
        return _lookback(form, span, lookback, ctx)
    if lookback is not None:
        span = TimeSpan(ctx.now - lookback, ctx.now, ctx.now_offset, ctx.now_offset)
    if form.kind == "day":
        return _day(form, span, ctx)
    return _ranged(form, span, ctx)


def _extra(sent: TimeSpan, span: TimeSpan) -> tuple[TimeSpan, ...]:
    """The parts of ``sent`` outside the window: before, then after (UTC)."""
    parts = []
    if sent.start < span.start:
        parts.append(TimeSpan(sent.start, span.start))
    if span.end < sent.end:
        parts.append(TimeSpan(span.end, sent.end))
    return tuple(parts)


def _wider_day(form: Form, span: TimeSpan, ctx: Ctx) -> tuple[dict[str, Any], TimeSpan] | None:
    zone = _zone(form, ctx)
    if zone is None or date_of(span.start, zone) != date_of(span.end - 1, zone):
        return None
    day = date_of(span.start, zone)
    start, end = midnights(day, zone), midnights(day + timedelta(days=1), zone)
    if len(start) != 1 or len(end) != 1:
        return None
    return _with_zone({str(form.argument): day.isoformat()}, form, ctx), TimeSpan(start[0], end[0])


def _wider_lookback(form: Form, span: TimeSpan, ctx: Ctx) -> tuple[dict[str, Any], TimeSpan] | None:
    if span.end >= ctx.now - ctx.granularity:
        return None
    length = ceil_to(ctx.now - span.start, _finest(form.units))
    text = spell_duration(length, form.units)
    if text is None:
        return None
    sign = "-" if form.signed else ""
    return {str(form.argument): sign + text}, lookback_range(ctx.now, length).utc()


def convert_widened(
    form: Form, span: TimeSpan, lookback: int | None, ctx: Ctx
) -> tuple[dict[str, Any], TimeSpan, tuple[TimeSpan, ...]] | None:
    """A ``day`` or ``lookback`` read wider than the window: the values,
    ``sent`` and ``extra``; None when the form cannot, or the read adds nothing."""
    if lookback is not None or form.kind not in ("day", "lookback"):
        return None
    read = _wider_day(form, span, ctx) if form.kind == "day" else _wider_lookback(form, span, ctx)
    if read is None:
        return None
    extra = _extra(read[1], span)
    return (read[0], read[1], extra) if extra else None


def _multi_day(forms: tuple[Form, ...], span: TimeSpan, ctx: Ctx) -> bool:
    for form in forms:
        zone = _zone(form, ctx)
        if form.kind != "day" or zone is None:
            return False
        if date_of(span.start, zone) == date_of(span.end - 1, zone):
            return False
    return bool(forms)


def _passes(
    forms: tuple[Form, ...], facts: Facts, span: TimeSpan, lookback: int | None, ctx: Ctx
) -> Conversion | None:
    own_caps = any(f.max_range is not None for f in forms)
    for i, form in enumerate(forms):
        cap = form_max_range(form, facts) if own_caps else None
        if cap is not None and span.reach > cap:
            continue
        exact = convert_exact(form, span, lookback, ctx)
        if exact is not None:
            return Conversion(i, exact[0], exact[1])
    for i, form in enumerate(forms):
        cap = form_max_range(form, facts)
        wider = convert_widened(form, span, lookback, ctx)
        if wider is not None and (cap is None or wider[1].reach <= cap):
            return Conversion(i, wider[0], sent=wider[1], extra=wider[2])
    return None


def convert_for_tool(
    span: TimeSpan, lookback: int | None, forms: tuple[Form, ...], facts: Facts, ctx: Ctx
) -> Conversion | str:
    """The conversion of a person's window for the tool, or the refusal code (a fill)."""
    problem = fact_problem(span, tool_facts(forms, facts), ctx.now)
    if problem is not None:
        return problem
    found = _passes(forms, facts, span, lookback, ctx)
    if found is not None:
        partly = partly_beyond_retention(span, facts, ctx.now)
        return Conversion(found.form, found.values, found.rounded, found.sent, found.extra, partly)
    return "multi-day" if _multi_day(forms, span, ctx) else "no-form-holds"
