"""Period declarations (docs/time-windows.md §Declaring period forms): every definition check
refuses with a clear error naming the tool and the form, the sugar expands to its forms, and the
per-form caps combine as form-max-range.test.ts says."""

from __future__ import annotations

from typing import Any

import pytest

from node.windows.errors import DeclarationError
from node.windows.forms import Bound, Facts, declare, form_facts, tool_facts
from node.windows.turn import parse_turn
from tests.node.windowkit import DAY, EPOCH, LB, SCHEMA, WALL, bounds, period

BAD = [
    ({"forms": [LB], "argument": "w", "spelling": "lookback"}, "either forms or the sugar"),
    ({"argument": "w", "spelling": "range"}, "spelling range is not one of"),
    ({"forms": {"kind": "day"}}, "forms must be a list"),
    ({"forms": [{"kind": "week", "argument": "w"}]}, "form 0: kind must be one of"),
    ({"forms": [DAY | {"edge": "inclusive"}]}, "form 0: the form does not take edge"),
    (
        {"forms": [bounds("iso", "exclusive") | {"to": {"argument": "end", "as": "iso"}}]},
        "to.edge is required",
    ),
    (
        {
            "forms": [
                bounds("iso", "exclusive")
                | {"from": {"argument": "start", "as": "iso", "edge": "exclusive"}}
            ]
        },
        "from.edge may only be inclusive",
    ),
    (
        {
            "forms": [
                bounds("iso", "exclusive")
                | {"to": {"argument": "start", "as": "iso", "edge": "exclusive"}}
            ]
        },
        "from and to must name different arguments",
    ),
    ({"forms": [{"kind": "day", "argument": "nope"}]}, "argument 'nope' is not in the tool's"),
    (
        {"forms": [{"kind": "joined", "argument": "date", "as": "iso", "joiner": "~"}]},
        'joiner must be ".." or "/"',
    ),
    (
        {"forms": [{"kind": "joined", "argument": "date", "as": "unix", "joiner": ".."}]},
        "as must be one of",
    ),
    (
        {
            "forms": [
                {
                    "kind": "object",
                    "argument": "r",
                    "as": "iso",
                    "edge": "exclusive",
                    "keys": {"from": "a", "to": "a"},
                }
            ]
        },
        "keys must name two different keys",
    ),
    (
        {
            "forms": [
                {"kind": "object", "argument": "r", "as": "iso", "keys": {"from": "a", "to": "b"}}
            ]
        },
        "edge is required",
    ),
    ({"forms": [{"kind": "lookback", "argument": "w"}]}, "signed must be true or false"),
    ({"forms": [LB | {"units": "mx"}]}, "units must be distinct letters of smhdw"),
    ({"forms": [LB | {"units": "mm"}]}, "units must be distinct letters of smhdw"),
    ({"forms": [LB | {"maxRange": "24 hours"}]}, "maxRange must be a duration"),
    ({"forms": [LB | {"maxRange": "0h"}]}, "maxRange must be a duration"),
    ({"forms": [LB | {"actions": "list"}]}, "actions must be a non-empty list"),
    ({"forms": [LB | {"actions": ["delete"]}]}, "actions delete are not actions of the tool"),
    (
        {"forms": [{"kind": "day", "argument": "date", "zone": {"argument": "zz"}}]},
        "argument 'zz' is not in the tool's input schema",
    ),
    (
        {
            "forms": [
                bounds("iso", "exclusive")
                | {"from": {"argument": "start", "as": "iso", "default": "yesterday"}}
            ]
        },
        'from.default must be "now" or an ISO-8601 instant',
    ),
    (
        {
            "forms": [
                bounds("date", "exclusive")
                | {"from": {"argument": "start", "as": "date", "dates": True}}
            ]
        },
        "from.dates is true or false, and only for as: iso",
    ),
    (
        {
            "forms": [
                bounds("iso", "exclusive")
                | {"to": {"argument": "end", "as": "iso", "edge": "exclusive", "step": "s"}}
            ]
        },
        'to.step may only be "ms"',
    ),
    ({"forms": [LB], "facts": {"direction": "backwards"}}, "facts.direction must be one of"),
    ({"forms": [LB], "facts": {"retention": "forever"}}, "facts.retention must be a duration"),
    ({"forms": [LB], "facts": {"filtersToAsked": "yes"}}, "facts.filtersToAsked must be"),
    ({"forms": [LB], "facts": {"policy": "strict"}}, "facts does not take policy"),
    ({"forms": [LB], "bogus": 1}, "the declaration does not take bogus"),
]


@pytest.mark.parametrize(("decl", "why"), BAD)
def test_a_bad_declaration_is_refused(decl: dict[str, Any], why: str) -> None:
    with pytest.raises(DeclarationError, match=r"^t: ") as info:
        declare("t", SCHEMA, decl)
    assert why in str(info.value)


def test_encodings_need_their_json_types() -> None:
    typed = {
        "properties": {"n": {"type": "integer"}, "s": {"type": "string"}, "e": {"type": "integer"}}
    }
    epoch_on_text = {
        "kind": "bounds",
        "from": {"argument": "s", "as": "epoch-ms"},
        "to": {"argument": "n", "as": "epoch-ms", "edge": "exclusive"},
    }
    with pytest.raises(DeclarationError, match="argument 's' must be a number \\(epoch-ms"):
        declare("t", typed, {"forms": [epoch_on_text]})
    iso_on_number = {
        "kind": "bounds",
        "from": {"argument": "n", "as": "iso"},
        "to": {"argument": "e", "as": "iso", "edge": "exclusive"},
    }
    with pytest.raises(DeclarationError, match="argument 'n' must be a string"):
        declare("t", typed, {"forms": [iso_on_number]})
    with pytest.raises(DeclarationError, match="argument 'n' must be a string"):
        declare("t", typed, {"forms": [{"kind": "lookback", "argument": "n", "signed": False}]})


def test_the_sugar_expands_to_its_forms() -> None:
    p = declare("t", SCHEMA, {"argument": "w", "accepts": ["signed-lookback", "iso-range"]})
    signed, iso = p.forms
    assert (signed.kind, signed.signed, signed.units) == ("lookback", True, "mhdw")
    assert (iso.kind, iso.joiner, iso.lower, iso.upper) == (
        "joined",
        "..",
        Bound(None, "iso"),
        Bound(None, "iso", "inclusive"),
    )
    wall = declare("t", SCHEMA, {"argument": "w", "spelling": "wall-range", "zoneArgument": "tz"})
    assert (wall.forms[0].upper, wall.forms[0].zone_argument) == (Bound(None, "wall"), "tz")
    assert declare("t", SCHEMA, {"argument": "w"}).forms == ()  # no spelling: no form


def test_every_kind_declares() -> None:
    obj = {
        "kind": "object",
        "argument": "r",
        "as": "epoch-s",
        "edge": "inclusive",
        "keys": {"from": "since", "to": "until"},
    }
    joined = {
        "kind": "joined",
        "argument": "date",
        "as": "date",
        "joiner": "/",
        "zone": {"argument": "tz"},
    }
    p = period(EPOCH, LB, DAY, WALL, obj, joined, direction="past", granularity="1s")
    assert [f.kind for f in p.forms] == ["bounds", "lookback", "day", "bounds", "object", "joined"]
    assert p.forms[4].keys == ("since", "until")
    assert p.forms[5].upper == Bound(None, "date", "inclusive")  # a joined edge defaults
    assert p.facts == Facts(direction="past", granularity=1000)
    assert p.facts.granularity_ms == 1000
    assert period(LB).facts.granularity_ms == 60_000


def test_forms_belong_to_actions() -> None:
    p = period(LB | {"actions": ["list"]}, EPOCH | {"actions": ["changes"]}, DAY)
    assert [f.kind for f in p.forms_for("list")] == ["lookback", "day"]
    assert [f.kind for f in p.forms_for("changes")] == ["bounds", "day"]
    assert [f.kind for f in p.forms_for(None)] == ["day"]


def test_per_form_caps_combine_as_form_max_range_says() -> None:
    uncapped = period(EPOCH, LB, maxRange="2d")
    assert tool_facts(uncapped.forms, uncapped.facts).max_range == 2 * 86_400_000
    capped = period(EPOCH | {"maxRange": "1h"}, LB | {"maxRange": "1d"})
    assert tool_facts(capped.forms, capped.facts).max_range == 86_400_000
    assert form_facts(capped.forms[0], capped.facts).max_range == 3_600_000
    partly = period(EPOCH | {"maxRange": "1h"}, LB)
    assert tool_facts(partly.forms, partly.facts).max_range is None
    inherits = period(EPOCH | {"maxRange": "1h"}, LB, maxRange="3h")
    assert tool_facts(inherits.forms, inherits.facts).max_range == 3 * 3_600_000
    assert form_facts(inherits.forms[1], inherits.facts).max_range == 3 * 3_600_000


def test_a_turn_context_is_read_with_its_defaults() -> None:
    t = parse_turn({"turn": 2, "toolCallId": "x"}, clock=1_000, zone="Europe/Berlin")
    assert (t.now, t.now_offset, t.zone.key, t.iteration, t.mentions) == (
        1_000,
        0,
        "Europe/Berlin",
        0,
        0,
    )
    looked = parse_turn(
        {
            "turn": 2,
            "toolCallId": "x",
            "now": "2026-10-09T08:40:00-07:00",
            "windows": [{"source": "control", "lookback": "1h"}],
            "mentions": 2,
        },
        clock=0,
    )
    (w,) = looked.windows
    assert (w.lookback, w.span.end - w.span.start, w.span.start_offset) == (
        3_600_000,
        3_600_001,
        -420,
    )
    assert looked.mentions == 2
