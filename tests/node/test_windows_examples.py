"""Worked examples of the time-window decision (docs/time-windows.md), taken from
agentfootprint's own tests (named in each section's comment), with their fixtures: now
2026-10-09T15:40:00Z, zone America/Los_Angeles, granularity 1 minute.  Each test is numbered
as its example."""

from __future__ import annotations

from typing import Any

import pytest

from node.windows.convert import Conversion
from node.windows.facts import fact_problem
from node.windows.spans import TimeSpan
from tests.node.windowkit import (
    DAY,
    DAY_MS,
    EPOCH,
    HEAD,
    LA,
    LA_NAME,
    LB,
    MIN,
    NOW,
    SLB,
    TD,
    WALL,
    YD,
    M,
    T,
    Y,
    answered,
    bounds,
    convert,
    decision,
    exact,
    period,
    rng,
    row,
    span,
    sugar,
    turn,
)

SENT_Y = rng("2026-10-08T15:00:00Z", "2026-10-09T15:40:00.001Z")


def conversion(found: Conversion | str) -> Conversion:
    assert isinstance(found, Conversion), found
    return found


def wire(spans: tuple[TimeSpan, ...]) -> list[dict[str, str]]:
    return [s.wire() for s in spans]


# -- conversions (convert / widen / time-door / lookback-only / max-range-edge / form-max-range)


def test_1_iso_range_sugar():
    p = sugar(argument="w", spelling="iso-range")
    assert exact(p, M) == {"w": "2026-10-09T08:00:00-07:00..2026-10-09T08:40:59-07:00"}


def test_2_bounds_iso_exclusive():
    assert exact(bounds("iso", "exclusive"), M) == {
        "start": "2026-10-09T08:00:00-07:00",
        "end": "2026-10-09T08:41:00-07:00",
    }


def test_3_bounds_epoch_ms_inclusive():
    assert exact(bounds("epoch-ms", "inclusive"), M) == {
        "start": 1791558000000,
        "end": 1791560459999,
    }


def test_5_wall_range_sugar_with_zone_argument():
    p = sugar(argument="w", spelling="wall-range", zoneArgument="tz")
    assert exact(p, M) == {"w": "2026-10-09T08:00:00..2026-10-09T08:40:59", "tz": LA_NAME}


def test_6_whole_day():
    assert exact(DAY, TD) == {"date": "2026-10-09", "tz": LA_NAME}
    assert exact(bounds("date", "inclusive", zone=True), TD) == {
        "start": "2026-10-09",
        "end": "2026-10-09",
        "tz": LA_NAME,
    }
    assert exact(DAY, M) is None


def test_7_lookback_window_into_a_lookback_form():
    window = rng("2026-10-09T15:00:00Z", "2026-10-09T15:40:00.001Z")
    assert exact(SLB, window, 40 * MIN) == {"w": "-40m"}
    assert exact(LB, window, 3600 * 1000) == {"w": "1h"}
    assert exact(LB, window, 90 * 1000) is None


def test_8_lookback_window_into_epoch_bounds():
    window = rng("2026-10-09T15:00:00Z", "2026-10-09T15:40:00.001Z")
    assert exact(EPOCH, window, 40 * MIN) == {"start": 1791558000000, "end": 1791560400000}


def test_10_forms_in_preference_order():
    early = rng("2026-10-09T06:00:00-07:00", "2026-10-09T07:00:00-07:00")
    assert conversion(convert([SLB, EPOCH], early)).form == 1
    found = conversion(convert([SLB, EPOCH], M))
    assert (found.form, found.values, found.rounded) == (0, {"w": "-40m"}, True)


def test_11_doubled_hour_and_the_app_zone():
    doubled = rng("2026-11-01T08:30:00Z", "2026-11-01T09:00:00Z")
    assert exact(WALL, doubled) is None
    joined = {"kind": "joined", "argument": "w", "as": "wall", "joiner": "..", "edge": "inclusive"}
    assert exact(joined, M) is None
    assert exact(joined, M, app_zone=LA) == {"w": "2026-10-09T08:00:00..2026-10-09T08:40:59"}


def test_12_widened_lookback():
    found = conversion(convert([LB], Y))
    assert found.values == {"w": "1480m"}
    assert found.sent is not None
    assert found.sent.wire() == SENT_Y
    assert wire(found.extra) == [rng("2026-10-08T15:41:00Z", "2026-10-09T15:40:00.001Z")]
    assert conversion(convert([SLB], Y)).values == {"w": "-1480m"}
    days = conversion(convert([{**LB, "units": "d"}], Y))
    assert days.values == {"w": "2d"}
    assert len(days.extra) == 2


def test_13_widened_day():
    found = conversion(convert([DAY], M))
    assert found.values == {"date": "2026-10-09", "tz": LA_NAME}
    assert found.sent is not None
    assert found.sent.wire() == rng("2026-10-09T07:00:00Z", "2026-10-10T07:00:00Z")
    assert wire(found.extra) == [
        rng("2026-10-09T07:00:00Z", "2026-10-09T15:00:00Z"),
        rng("2026-10-09T15:41:00Z", "2026-10-10T07:00:00Z"),
    ]


def test_15_yesterday_into_a_lookback():
    found = conversion(convert([LB], YD))
    assert found.values == {"w": "1960m"}
    assert found.sent is not None
    assert found.sent.wire() == rng("2026-10-08T07:00:00Z", "2026-10-09T15:40:00.001Z")
    assert wire(found.extra) == [rng("2026-10-09T07:00:00Z", "2026-10-09T15:40:00.001Z")]
    assert convert([LB], YD, maxRange="24h") == "no-form-holds"
    assert convert([LB], TD) == "no-form-holds"


def test_16_multi_day():
    assert convert([DAY], rng("2026-10-06T00:00:00-07:00", "2026-10-08T00:00:00-07:00")) == (
        "multi-day"
    )


@pytest.mark.parametrize("retention", ["30h", "1d"])
def test_17_partly_beyond_retention(retention):
    assert conversion(convert([LB], YD, retention=retention)).partly_beyond_retention


def test_18_max_range_edge():
    day = rng("2026-10-08T15:40:00Z", "2026-10-09T15:40:00.001Z")
    assert conversion(convert([LB], day, DAY_MS, maxRange="24h")).values == {"w": "1d"}
    longer = rng("2026-10-08T15:39:00Z", "2026-10-09T15:40:00.001Z")
    assert convert([LB], longer, 1441 * MIN, maxRange="24h") == "over-max-range"
    covering = rng("2026-10-08T15:40:00Z", "2026-10-09T15:00:00Z")
    assert conversion(convert([LB], covering, maxRange="24h")).values == {"w": "1d"}
    earlier = rng("2026-10-08T15:39:00Z", "2026-10-09T15:00:00Z")
    assert convert([LB], earlier, maxRange="24h") == "no-form-holds"
    assert exact(bounds("iso", "exclusive"), day, DAY_MS) == {
        "start": "2026-10-08T15:40:00Z",
        "end": "2026-10-09T15:40:00Z",
    }


def _facts(**facts: Any) -> Any:
    return period(LB, **facts).facts


def test_21_facts():
    assert (
        fact_problem(
            span(rng("2026-10-09T16:00:00Z", "2026-10-09T17:00:00Z")), _facts(direction="past"), NOW
        )
        == "time-future"
    )
    early = span(rng("2026-10-09T06:00:00-07:00", "2026-10-09T07:00:00-07:00"))
    assert fact_problem(early, _facts(direction="future"), NOW) == "time-past"
    august = span(rng("2026-08-01T00:00:00Z", "2026-08-02T00:00:00Z"))
    assert fact_problem(august, _facts(retention="30d"), NOW) == "beyond-retention"
    september = span(rng("2026-09-01T00:00:00Z", "2026-09-20T00:00:00Z"))
    assert fact_problem(september, _facts(retention="30d"), NOW) is None
    capped = _facts(retention="30d", maxRange="24h")
    assert fact_problem(september, capped, NOW) == "over-max-range"


# -- decisions and rows (bind / widen / lookback-only / max-range-edge / period-run) ----------


def test_22_filled_from_an_answered_window():
    d_row = row([EPOCH], {}, turn(windows=[answered(M)]))
    assert d_row == HEAD | {
        "how": "filled",
        "form": 0,
        "asked": M,
        "person": M | {"source": "answered", "mention": 0},
    }
    assert decision([EPOCH], {}, turn(windows=[answered(M)])).values == {
        "start": 1791558000000,
        "end": 1791560460000,
    }


def test_23_no_window_and_several_mentions():
    assert row([EPOCH], {}) == HEAD | {"how": "not-filled", "why": "no-window"}
    two = turn(windows=[answered(M), answered(Y, mention=1)])
    assert row([EPOCH], {}, two) == HEAD | {"how": "not-filled", "why": "several-mentions"}


def test_24_open_mention():
    assert row([EPOCH], {}, turn(open=[[M]])) == HEAD | {"how": "not-filled", "why": "open-reading"}
    refused = row([EPOCH], {}, turn(open=[[Y]]), direction="future")
    assert refused == HEAD | {"how": "refused", "refused": "time-past"}


def test_26_no_form_holds_a_fill():
    assert row([LB], {}, turn(windows=[answered(T)])) == HEAD | {
        "how": "refused",
        "refused": "no-form-holds",
        "asked": T,
        "person": T | {"source": "answered", "mention": 0},
    }


def test_28_sent_window_differs():
    sent = {"start": 1791561600000, "end": 1791565200000}  # [16:00Z, 17:00Z)
    asked = rng("2026-10-09T16:00:00Z", "2026-10-09T17:00:00Z")
    one = row([EPOCH], sent, turn(windows=[answered(M)]))
    assert one == HEAD | {
        "how": "model-chosen",
        "form": 0,
        "asked": asked,
        "person": M | {"source": "answered", "mention": 0},
    }
    two = row([EPOCH], sent, turn(windows=[answered(M), answered(Y, mention=1)]))
    assert two == HEAD | {"how": "model-chosen", "form": 0, "asked": asked}
    assert row([EPOCH], sent) == HEAD | {"how": "model", "form": 0, "asked": asked}


def test_29_unread():
    assert row([EPOCH], {"start": 1}) == HEAD | {"how": "unread"}


def test_30_bound_by_value_to_a_lookback():
    t = turn(windows=[answered(None, lookback="40m")])
    sent = {"start": 1791558000000, "end": 1791560400000}  # [15:00Z, 15:40Z)
    for forms, args in (([EPOCH], sent), ([LB], {"w": "40m"})):
        wired = row(forms, args, t)
        assert (wired["how"], wired["by"]) == ("bound", "value")
        assert wired["person"]["source"] == "answered"


def test_31_past_facts():
    t = turn(windows=[answered(T)])
    person = T | {"source": "answered", "mention": 0}
    assert row([EPOCH], {}, t, direction="past") == HEAD | {
        "how": "refused",
        "refused": "time-future",
        "asked": T,
        "person": person,
    }
    sent_t = {"start": 1791644400000, "end": 1791646860000}  # T in epoch-ms
    refused = row([EPOCH], sent_t, direction="past")
    assert refused == HEAD | {
        "how": "refused",
        "refused": "time-future",
        "form": 0,
        "asked": span(T).utc().wire(),
    }
    assert row([EPOCH], sent_t)["how"] == "model"


def test_32_sent_yesterday_against_facts():
    sent_y = {"start": 1791471600000, "end": 1791474060000}  # Y in epoch-ms
    assert row([EPOCH], sent_y, direction="future")["refused"] == "time-past"
    assert row([EPOCH], sent_y, retention="12h")["refused"] == "beyond-retention"
    assert row([EPOCH], sent_y, maxRange="30m")["refused"] == "over-max-range"


def test_34_day_form_fill():
    across = rng(Y["from"], M["to"])
    assert row([DAY], {}, turn(windows=[answered(across)])) == HEAD | {
        "how": "refused",
        "refused": "multi-day",
        "asked": across,
        "person": across | {"source": "answered", "mention": 0},
    }
    filled = decision([DAY], {}, turn(windows=[answered(M)]))
    assert filled.values == {"date": "2026-10-09", "tz": LA_NAME}
    wired = filled.row.wire()
    assert wired["how"] == "filled"
    assert wired["sent"] == rng("2026-10-09T07:00:00Z", "2026-10-10T07:00:00Z")
    assert len(wired["differs"]["extra"]) == 2


def test_35_widened_row_and_trimmed_by_tool():
    t = turn(windows=[answered(Y)])
    wired = row([LB], {}, t)
    assert wired["sent"] == SENT_Y
    assert wired["differs"] == {"extra": [rng("2026-10-08T15:41:00Z", "2026-10-09T15:40:00.001Z")]}
    trimmed = row([LB], {}, t, filtersToAsked=True)
    assert trimmed["trimmedByTool"] is True
    assert "differs" not in trimmed
    assert trimmed["sent"] == SENT_Y


def test_36_dst_gap_and_overlap_in_a_sent_wall_value():
    gap = {"start": "2026-03-08T02:30", "end": "2026-03-08T04:00", "tz": LA_NAME}
    assert row([WALL], gap) == HEAD | {
        "how": "refused",
        "refused": "dst-gap",
        "form": 0,
        "argument": "start",
    }
    overlap = gap | {"start": "2026-11-01T01:30", "end": "2026-11-01T04:00"}
    assert row([WALL], overlap) == HEAD | {"how": "unread"}


def test_38_open_reading_then_filled_after_confirmation():
    assert row([LB], {}, turn(open=[[YD]]))["how"] == "not-filled"
    after = decision([LB], {}, turn(windows=[answered(YD)]))
    wired = after.row.wire()
    assert wired["how"] == "filled"
    assert wired["asked"] == YD
    assert wired["person"] == YD | {"source": "answered", "mention": 0}
    assert wired["sent"] == rng("2026-10-08T07:00:00Z", "2026-10-09T15:40:00.001Z")
    assert wired["differs"]["extra"] == [rng("2026-10-09T07:00:00Z", "2026-10-09T15:40:00.001Z")]
    assert after.values == {"w": "1960m"}


def test_period_run_ui_window_is_a_control_mention():
    control = {"source": "control", "range": M, "zone": LA_NAME}
    filled = row([EPOCH], {}, turn(windows=[control]))
    assert filled["person"] == M | {"source": "control"}
    both = turn(windows=[answered(Y), control])
    assert row([EPOCH], {}, both)["why"] == "several-mentions"
