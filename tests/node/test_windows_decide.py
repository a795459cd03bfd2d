"""The decision of one call (docs/time-windows.md §What the node decides) beyond the worked
examples: every ``how``, every ``why``, every refusal code on a fill, an open reading and a sent
value, quotes that name a window, ``rounded`` and ``partlyBeyondRetention`` on the row, per-form
caps."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from node.windows.rows import from_wire
from tests.node.windowkit import (
    DAY,
    EPOCH,
    HEAD,
    LA_NAME,
    LB,
    WALL,
    YD,
    M,
    T,
    Y,
    answered,
    bounds,
    decision,
    row,
    turn,
)

SENT_M = {"start": 1791558000000, "end": 1791560460000}
SENT_Y = {"start": 1791471600000, "end": 1791474060000}
PERSON_M = M | {"source": "answered", "mention": 0}


@pytest.mark.parametrize(
    ("facts", "window", "code"),
    [
        ({"direction": "past"}, T, "time-future"),
        ({"direction": "future"}, Y, "time-past"),
        ({"retention": "12h"}, Y, "beyond-retention"),
        ({"maxRange": "30m"}, Y, "over-max-range"),
    ],
)
def test_every_fact_refuses_a_fill_an_open_reading_and_a_sent_value(facts, window, code):
    person = window | {"source": "answered", "mention": 0}
    filled = row([EPOCH], {}, turn(windows=[answered(window)]), **facts)
    assert filled == HEAD | {"how": "refused", "refused": code, "asked": window, "person": person}
    assert row([EPOCH], {}, turn(open=[[window]]), **facts) == HEAD | {
        "how": "refused",
        "refused": code,
    }
    sent = SENT_Y if window is Y else {"start": 1791644400000, "end": 1791646860000}
    refused = row([EPOCH], sent, turn(windows=[answered(M)]), **facts)
    assert (refused["refused"], refused["form"], refused["person"]) == (code, 0, PERSON_M)


def test_an_open_reading_is_refused_only_when_every_reading_is():
    assert row([EPOCH], {}, turn(open=[[T, M]]), direction="past")["how"] == "not-filled"
    both = row([EPOCH], {}, turn(open=[[Y, YD]]), direction="future")
    assert both == HEAD | {"how": "refused", "refused": "time-past"}
    assert row([EPOCH], {}, turn(open=[[]]))["why"] == "open-reading"
    assert row([EPOCH], {}, turn(mentions=1))["why"] == "open-reading"
    assert row([LB], {}, turn(open=[[T, YD]]))["how"] == "not-filled"  # YD widens


def test_several_mentions_include_an_open_one_and_a_control_window():
    settled_and_open = turn(windows=[answered(M)], open=[[Y]])
    assert row([EPOCH], {}, settled_and_open)["why"] == "several-mentions"
    assert row([EPOCH], {}, turn(windows=[answered(M)], mentions=2))["why"] == "several-mentions"


def test_a_quote_binds_the_window_it_names():
    windows = [answered(M, quote="this morning"), answered(Y, mention=1, quote="yesterday morning")]
    quoted = turn(windows=windows, quotes={"start": "Yesterday   MORNING"})
    bound = row([EPOCH], SENT_Y, quoted)
    assert (bound["how"], bound["by"], bound["person"]["mention"]) == ("bound", "quote", 1)
    chosen = row([EPOCH], SENT_M, quoted)
    assert chosen["how"] == "model-chosen"
    assert chosen["person"] == Y | {"source": "answered", "mention": 1}
    unnamed = turn(windows=windows, quotes={"start": "last week"})
    assert row([EPOCH], SENT_Y, unnamed)["by"] == "value"
    elsewhere = turn(windows=windows, quotes={"page": "yesterday morning"})
    assert row([EPOCH], SENT_M, elsewhere)["by"] == "value"
    contained = turn(windows=windows, quotes={"end": "morning"})  # inside both quotes
    assert row([EPOCH], SENT_Y, contained)["by"] == "quote"


def test_a_model_row_judges_the_form_and_marks_retention():
    capped = [EPOCH | {"maxRange": "30m"}, LB]
    refused = row(capped, SENT_M)
    assert (refused["refused"], refused["form"]) == ("over-max-range", 0)
    assert row([LB, EPOCH | {"maxRange": "30m"}], {"w": "1h"})["how"] == "model"
    partly = row([EPOCH], SENT_Y, retention="1d")
    assert (partly["how"], partly["partlyBeyondRetention"]) == ("model", True)


def test_a_fill_is_rounded_and_partly_beyond_retention():
    ms_window = {"from": "2026-10-09T15:00:00.5Z", "to": "2026-10-09T15:41:00.25Z"}
    epoch_s = bounds("epoch-s", "exclusive")
    assert row([epoch_s], {}, turn(windows=[answered(ms_window)]))["rounded"] is True
    assert "rounded" not in row([epoch_s], {}, turn(windows=[answered(M)]))
    partly = row([LB], {}, turn(windows=[answered(YD)]), retention="1d")
    assert (partly["how"], partly["partlyBeyondRetention"]) == ("filled", True)


def test_per_form_caps_on_a_fill():
    forms = [EPOCH | {"maxRange": "30m"}, bounds("iso", "exclusive")]
    filled = decision(forms, {}, turn(windows=[answered(M)]))
    assert (filled.row.form, filled.values) == (1, {"start": M["from"], "end": M["to"]})
    capped = [EPOCH | {"maxRange": "30m"}, bounds("iso", "exclusive") | {"maxRange": "20m"}]
    assert row(capped, {}, turn(windows=[answered(M)]))["refused"] == "over-max-range"


def test_a_zone_argument_alone_is_a_sent_period():
    assert row([WALL], {"tz": LA_NAME}, turn(windows=[answered(M)])) == HEAD | {"how": "unread"}
    assert row([DAY], {"tz": "  "}, turn(windows=[answered(M)]))["how"] == "filled"  # blank


def test_the_call_identity_is_the_turns():
    t = replace(turn(), turn=7, iteration=2, tool_call_id="tc-9")
    assert row([EPOCH], {}, t) == {
        "kind": "call-window",
        "turn": 7,
        "iteration": 2,
        "toolCallId": "tc-9",
        "toolName": "t",
        "how": "not-filled",
        "why": "no-window",
    }


@pytest.mark.parametrize(
    "args_turn",
    [
        ({}, turn(windows=[answered(M)])),
        ({}, turn(windows=[answered(Y)])),
        (SENT_Y, turn(windows=[answered(M), answered(Y, mention=1)])),
        ({"start": 1}, turn()),
        ({"start": "2026-03-08T02:30", "end": "2026-03-08T04:00", "tz": LA_NAME}, turn()),
    ],
)
def test_rows_read_back_from_their_wire_form(args_turn: tuple[dict[str, Any], Any]):
    args, t = args_turn
    for forms in ([EPOCH], [LB], [WALL]):
        wired = row(forms, args, t)
        assert from_wire(wired).wire() == wired
