"""Conversion and read-back of every form kind and encoding (docs/time-windows.md §What the node
decides) in real zones: daylight-saving gaps and overlaps in America/Los_Angeles and Europe/Berlin,
a skipped midnight, leap days, the year boundary, inclusive and exclusive edges."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from node.windows.convert import Conversion, convert_exact, convert_for_tool
from node.windows.readback import read_back
from node.windows.spans import TimeSpan
from node.windows.zones import read_wall
from tests.node.windowkit import (
    BERLIN,
    DAY,
    EPOCH,
    LA,
    LA_NAME,
    LB,
    NOW,
    SLB,
    WALL,
    M,
    bounds,
    convert,
    ctx,
    exact,
    period,
    rng,
    row,
    span,
)

UTC = ZoneInfo("UTC")
BERLIN_NAME = "Europe/Berlin"
OBJ = {
    "kind": "object",
    "argument": "r",
    "as": "epoch-s",
    "edge": "inclusive",
    "keys": {"from": "since", "to": "until"},
}
SLASH = {"kind": "joined", "argument": "w", "as": "epoch-ms", "joiner": "/", "edge": "exclusive"}
JOINED_WALL = {
    "kind": "joined",
    "argument": "w",
    "as": "wall",
    "joiner": "..",
    "zone": {"argument": "tz"},
}
UTC_DAY = {"kind": "day", "argument": "date"}


def back(form: dict[str, Any], args: dict[str, Any], app_zone: ZoneInfo | None = None) -> Any:
    found = read_back(period(form).forms[0], args, NOW, app_zone)
    return None if found is None else found.wire()


# -- read-back ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("form", "args", "read"),
    [
        (
            bounds("iso", "inclusive"),
            {"start": "2026-10-09T08:00-07:00", "end": "2026-10-09T08:40-07:00"},
            M,
        ),
        (
            bounds("iso", "inclusive"),
            {"start": "2026-10-09T08:00:00-07:00", "end": "2026-10-09T08:40:59-07:00"},
            M,
        ),
        (
            bounds("iso", "inclusive"),
            {"start": "2026-10-09T15:00:00Z", "end": "2026-10-09T15:40:59.999Z"},
            M,
        ),
        (bounds("iso", "exclusive"), {"start": "2026-10-09T15:00Z", "end": "2026-10-09T15:41Z"}, M),
        (bounds("epoch-ms", "inclusive"), {"start": 1791558000000, "end": 1791560459999}, M),
        (bounds("epoch-s", "inclusive"), {"start": 1791558000, "end": 1791560459}, M),
        (bounds("epoch-s", "inclusive"), {"start": 1791558000.0, "end": 1791560459.0}, M),
        (bounds("epoch-s", "exclusive"), {"start": 1791558000, "end": 1791560460}, M),
        (WALL, {"start": "2026-10-09T08:00", "end": "2026-10-09T08:41", "tz": LA_NAME}, M),
        (
            bounds("wall", "inclusive", zone=True),
            {
                "start": "2026-10-09T08:00:00.000",
                "end": "2026-10-09T08:40:59.999",
                "tz": LA_NAME,
            },
            M,
        ),
        (SLASH, {"w": "1791558000000/1791560460000"}, M),
        (OBJ, {"r": {"since": 1791558000, "until": 1791560459}}, M),
        (JOINED_WALL, {"w": "2026-10-09T08:00..2026-10-09T08:40", "tz": LA_NAME}, M),
        (LB, {"w": "40m"}, rng("2026-10-09T15:00:00Z", "2026-10-09T15:40:00.001Z")),
        (SLB, {"w": "-1h"}, rng("2026-10-09T14:40:00Z", "2026-10-09T15:40:00.001Z")),
        (
            bounds("date", "inclusive", zone=True),
            {"start": "2026-10-08", "end": "2026-10-09", "tz": LA_NAME},
            rng("2026-10-08T07:00:00Z", "2026-10-10T07:00:00Z"),
        ),
        (
            bounds("date", "exclusive", zone=True),
            {"start": "2026-10-08", "end": "2026-10-09", "tz": LA_NAME},
            rng("2026-10-08T07:00:00Z", "2026-10-09T07:00:00Z"),
        ),
    ],
)
def test_sent_values_read_back_in_utc(form, args, read):
    assert back(form, args) == span(read).utc().wire()


@pytest.mark.parametrize(
    ("form", "args"),
    [
        (
            bounds("iso", "exclusive"),
            {"start": "2026-10-09T15:00:00.0001Z", "end": "2026-10-09T15:41Z"},
        ),  # finer than a millisecond
        (bounds("iso", "exclusive"), {"start": "2026-10-09 15:00Z", "end": "2026-10-09T15:41Z"}),
        (bounds("iso", "exclusive"), {"start": "2026-10-09T15:41Z", "end": "2026-10-09T15:00Z"}),
        (bounds("iso", "exclusive"), {"start": "2026-10-09T15:00Z"}),  # an end without default
        (bounds("epoch-ms", "exclusive"), {"start": True, "end": 2}),
        (bounds("epoch-ms", "exclusive"), {"start": 1.5, "end": 2}),
        (bounds("epoch-ms", "exclusive"), {"start": 1, "end": 2**53}),
        (SLASH, {"w": "01/2"}),
        (SLASH, {"w": "1/2/3"}),
        (SLASH, {"w": "a/b"}),
        (OBJ, {"r": {"since": 1}}),
        (OBJ, {"r": [1, 2]}),
        (DAY, {"date": "2026-10-09", "tz": "PST"}),
        (DAY, {"date": "2026-10-09", "tz": "+05:30"}),
        (DAY, {"date": "2026-02-29", "tz": LA_NAME}),
        (UTC_DAY, {"date": "2026-10-09"}),  # no zone argument, no app zone
        (LB, {"w": "-40m"}),
        (SLB, {"w": "40m"}),
        (LB | {"units": "d"}, {"w": "40m"}),
        (LB, {"w": 40}),
        (WALL, {"start": "2026-11-01T01:30", "end": "2026-11-01T04:00", "tz": LA_NAME}),
        (WALL, {"start": "2026-10-09T08:00Z", "end": "2026-10-09T09:00", "tz": LA_NAME}),
    ],
)
def test_values_no_form_reads(form, args):
    assert back(form, args) is None


def test_a_zoneless_day_reads_in_the_app_zone():
    berlin_day = rng("2026-10-08T22:00:00Z", "2026-10-09T22:00:00Z")
    assert back(UTC_DAY, {"date": "2026-10-09"}, BERLIN) == berlin_day


# -- daylight saving, leap days, the year boundary ----------------------------------------------


@pytest.mark.parametrize(
    ("zone", "day", "read"),
    [
        (LA_NAME, "2026-03-08", rng("2026-03-08T08:00:00Z", "2026-03-09T07:00:00Z")),  # 23 h
        (LA_NAME, "2026-11-01", rng("2026-11-01T07:00:00Z", "2026-11-02T08:00:00Z")),  # 25 h
        (BERLIN_NAME, "2026-03-29", rng("2026-03-28T23:00:00Z", "2026-03-29T22:00:00Z")),
        (BERLIN_NAME, "2026-10-25", rng("2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z")),
        ("UTC", "2028-02-29", rng("2028-02-29T00:00:00Z", "2028-03-01T00:00:00Z")),
        (LA_NAME, "2026-12-31", rng("2026-12-31T08:00:00Z", "2027-01-01T08:00:00Z")),
    ],
)
def test_a_day_is_its_two_midnights_and_fills_back(zone, day, read):
    args = {"date": day, "tz": zone}
    assert back(DAY, args) == read
    assert exact(DAY, read, zone=ZoneInfo(zone)) == args


@pytest.mark.parametrize(
    ("zone", "start", "end", "argument"),
    [
        (LA_NAME, "2026-03-08T02:30", "2026-03-08T04:00", "start"),
        (LA_NAME, "2026-03-08T01:00", "2026-03-08T02:59:59", "end"),
        (BERLIN_NAME, "2026-03-29T02:30", "2026-03-29T04:00", "start"),
        (BERLIN_NAME, "2026-03-29T01:00", "2026-03-29T02:00", "end"),
    ],
)
def test_a_wall_time_in_a_gap_is_refused_with_its_argument(zone, start, end, argument):
    wired = row([WALL], {"start": start, "end": end, "tz": zone})
    assert (wired["how"], wired["refused"], wired["form"], wired["argument"]) == (
        "refused",
        "dst-gap",
        0,
        argument,
    )
    assert "asked" not in wired


def test_a_gap_in_a_joined_value_names_the_joined_argument():
    sent = {"w": "2026-03-29T02:30..2026-03-29T05:00", "tz": BERLIN_NAME}
    assert row([JOINED_WALL], sent)["argument"] == "w"


def test_a_gap_is_judged_only_when_every_bound_is_sent():
    assert row([WALL], {"start": "2026-03-08T02:30", "tz": LA_NAME})["how"] == "unread"


@pytest.mark.parametrize(
    ("zone", "wall"), [(LA, datetime(2026, 11, 1, 1, 30)), (BERLIN, datetime(2026, 10, 25, 2, 30))]
)
def test_a_doubled_hour_reads_nothing_and_fills_nothing(zone, wall):
    first, second = read_wall(wall, zone)
    assert second - first == 3_600_000
    text = wall.isoformat(timespec="minutes")
    assert (
        row([WALL], {"start": text, "end": text[:11] + "05:00", "tz": zone.key})["how"] == "unread"
    )
    window = TimeSpan(first - 3_600_000, first)
    assert convert_exact(period(WALL).forms[0], window, None, ctx(zone)) is None


def test_a_skipped_midnight_reads_nothing():
    santiago = ZoneInfo("America/Santiago")
    assert read_wall(datetime(2026, 9, 6), santiago) == ()  # clocks go from 23:59:59 to 01:00
    assert back(DAY, {"date": "2026-09-06", "tz": "America/Santiago"}) is None
    assert back(DAY, {"date": "2026-09-07", "tz": "America/Santiago"}) is not None


def test_leap_days():
    leap = rng("2028-02-29T00:00:00-08:00", "2028-03-01T00:00:00-08:00")
    assert exact(DAY, leap) == {"date": "2028-02-29", "tz": LA_NAME}
    dated = bounds("date", "inclusive", zone=True)
    assert exact(dated, leap) == {"start": "2028-02-29", "end": "2028-02-29", "tz": LA_NAME}
    assert back(dated, {"start": "2028-02-28", "end": "2028-02-29", "tz": "UTC"}) == rng(
        "2028-02-28T00:00:00Z", "2028-03-01T00:00:00Z"
    )
    assert back(dated, {"start": "2026-02-28", "end": "2026-02-29", "tz": "UTC"}) is None


def test_the_year_boundary():
    eve = rng("2026-12-31T00:00:00-08:00", "2027-01-01T00:00:00-08:00")
    assert exact(bounds("date", "inclusive", zone=True), eve) == {
        "start": "2026-12-31",
        "end": "2026-12-31",
        "tz": LA_NAME,
    }
    assert exact(bounds("date", "exclusive", zone=True), eve)["end"] == "2027-01-01"
    late = span(rng("2026-12-31T23:30:00Z", "2027-01-01T00:30:00Z"))
    berlin = convert_for(DAY, late, BERLIN)
    assert isinstance(berlin, Conversion)
    assert berlin.values == {"date": "2027-01-01", "tz": BERLIN_NAME}
    assert berlin.sent is not None
    assert berlin.sent.wire() == rng("2026-12-31T23:00:00Z", "2027-01-01T23:00:00Z")
    assert convert_for(DAY, late, UTC) == "multi-day"


def convert_for(form: dict[str, Any], window: Any, zone: ZoneInfo) -> Conversion | str:
    p = period(form)
    return convert_for_tool(window, None, p.forms, p.facts, ctx(zone))


# -- edges -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("window", "end"),
    [
        (rng("2026-10-09T15:00:00Z", "2026-10-09T15:41:00Z"), "2026-10-09T15:40:59Z"),
        (rng("2026-10-09T15:00:00Z", "2026-10-09T15:41:00.25Z"), "2026-10-09T15:41:00.249Z"),
        (rng("2026-10-09T15:00:00Z", "2026-10-09T15:41:00.001Z"), "2026-10-09T15:41:00.000Z"),
    ],
)
def test_an_inclusive_end_is_written_one_step_back_and_reads_back_exactly(window, end):
    inclusive = bounds("iso", "inclusive")
    values = exact(inclusive, window)
    assert values["end"] == end
    assert back(inclusive, values) == span(window).utc().wire()
    assert exact(bounds("iso", "exclusive"), window)["end"] == window["to"]


def test_epoch_seconds_round_outward():
    window = rng("2026-10-09T15:00:00.5Z", "2026-10-09T15:41:00.25Z")
    found = convert([bounds("epoch-s", "inclusive")], window)
    assert isinstance(found, Conversion)
    assert (found.values, found.rounded) == ({"start": 1791558000, "end": 1791560460}, True)
    assert convert([bounds("epoch-s", "inclusive")], M).rounded is False  # type: ignore[union-attr]


def test_wall_values_keep_their_milliseconds():
    window = rng("2026-10-09T15:00:00.5Z", "2026-10-09T15:41:00.25Z")
    values = exact(WALL, window)
    assert values == {
        "start": "2026-10-09T08:00:00.500",
        "end": "2026-10-09T08:41:00.250",
        "tz": LA_NAME,
    }
    assert back(WALL, values) == span(window).utc().wire()


def test_every_kind_round_trips_an_exact_fill():
    kinds = (
        (EPOCH, None),
        (SLASH, None),
        (OBJ, None),
        (JOINED_WALL, None),
        (bounds("iso", "inclusive"), None),
        (bounds("wall", "inclusive"), LA),
    )
    for form, app in kinds:
        values = exact(form, M, app_zone=app)
        assert values is not None, form
        assert back(form, values, app) == span(M).utc().wire(), form


def test_a_sent_value_is_never_widened_or_refused_for_its_shape():
    whole_days = {"date": "2026-10-08", "tz": LA_NAME}
    assert row([DAY], whole_days)["how"] == "model"
    assert row([LB], {"w": "3d"})["how"] == "model"


def test_values_past_what_instants_spell_read_nothing():
    assert back(EPOCH, {"start": 2**53 - 5, "end": 2**53 - 1}) is None
    assert back(DAY, {"date": "9999-12-31", "tz": "Asia/Tokyo"}) is None
    far = {"start": "9999-12-31T23:30", "end": "9999-12-31T23:59", "tz": "Pacific/Kiritimati"}
    assert back(WALL, far) == rng("9999-12-31T09:30:00Z", "9999-12-31T09:59:00Z")
