"""What a search filter and a namespace condition match (docs/langgraph.md §Filters, §Reads):
``InMemoryStore``'s rules, and where it raises — an ordering operator on a missing or
non-numeric field — nothing matching instead.  What SQL checks of a filter first
(``narrowing``) never leaves out a value the filter matches, whatever its numbers, text and
keys: SQLite itself runs the tests on the item's envelope.
"""

from __future__ import annotations

import math
import sqlite3
from contextlib import closing
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.extras import need

need("langgraph", module=True)

from langgraph.store.memory import InMemoryStore  # noqa: E402

from node.langgraph.filters import (  # noqa: E402
    check_filter,
    matches,
    namespace_matches,
    narrowing,
)
from node.views.item_reads import FieldTest  # noqa: E402
from node.views.items import envelope  # noqa: E402

VALUE = {"n": 3, "f": True, "s": "kiwi", "t": [1, [2, 3]], "d": {"p": 1, "q": {"r": "x"}}}

AGREED = [  # (filter, whether it matches VALUE): InMemoryStore answers the same
    ({"n": 3}, True),
    ({"n": 3.0}, True),
    ({"f": 1}, True),  # Python's equality: True == 1
    ({"s": "kiwi", "n": 4}, False),
    ({"t": [1, [2, 3]]}, True),
    ({"t": [1]}, False),  # a list matches a list of as many items
    ({"d": {"p": 1}}, True),  # a dict matches a dict holding its keys
    ({"d": {"q": {"r": "x"}, "p": 1}}, True),
    ({"d": {"p": 2}}, False),
    ({"d": {"p": {"$gte": 1}}}, True),
    ({"missing": None}, True),  # a missing field is None
    ({"n": {"$gt": 2, "$lt": 4}}, True),
    ({"n": {"$gte": 4}}, False),
    ({"n": {"$ne": 3}}, False),
    ({"missing": {"$ne": 1}}, True),
    ({"s": {"$eq": "kiwi"}}, True),
    ({"f": {"$lte": 1}}, True),  # a boolean is a number
]


@pytest.mark.parametrize(("filter_", "expected"), AGREED)
def test_a_filter_matches_as_in_memory_store_matches(filter_: dict, expected: bool) -> None:
    store = InMemoryStore()
    store.put(("a",), "k", VALUE)
    assert bool(store.search(("a",), filter=filter_)) is expected
    assert matches(VALUE, filter_) is expected


@pytest.mark.parametrize(
    "filter_",
    [{"missing": {"$gt": 1}}, {"s": {"$lt": 5}}, {"d": {"$gte": 0}}, {"n": {"$gt": "a"}}],
)
def test_an_ordering_operator_that_cannot_compare_matches_nothing(filter_: dict) -> None:
    store = InMemoryStore()
    store.put(("a",), "k", VALUE)
    with pytest.raises((TypeError, ValueError)):  # InMemoryStore raises
        store.search(("a",), filter=filter_)
    assert matches(VALUE, filter_) is False


def test_text_is_ordered_against_text() -> None:
    assert matches(VALUE, {"s": {"$gt": "apple", "$lt": "lemon"}})
    assert not matches(VALUE, {"s": {"$gte": "lemon"}})


def test_an_unknown_operator_is_refused_before_anything_is_read() -> None:
    for bad in ({"n": {"$in": [3]}}, {"d": {"p": {"$regex": "x"}}}, {"n": {"$gt": 1, "x": 2}}):
        with pytest.raises(ValueError, match="Unsupported operator"):
            check_filter(bad)
    check_filter({"d": {"p": 1}, "n": {"$gte": 1}})


def test_a_wildcard_label_matches_any_one_label() -> None:
    ns = ("users", "ada", "prefs")
    assert namespace_matches("prefix", ("users", "*"), ns)
    assert namespace_matches("suffix", ("*", "prefs"), ns)
    assert not namespace_matches("prefix", ("*", "bob"), ns)
    assert not namespace_matches("suffix", ("users", "ada", "prefs", "x"), ns)
    assert namespace_matches("prefix", (), ns)
    with pytest.raises(ValueError, match="Unsupported match type"):
        namespace_matches("infix", ("users",), ns)


# -- what SQL checks first ---------------------------------------------------------------------

KEYS = ["n", "a.b", "x y", "ü", "$", "[0]", "'q'", "k\\", 'say "hi"', "nul\0"]
NUMBERS = st.one_of(
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(min_value=-1e-6, max_value=1e-6),
    st.booleans(),
)
TEXT = st.text(max_size=6)
SCALARS = st.one_of(NUMBERS, TEXT, st.none())
FIELDS = st.one_of(
    SCALARS, st.lists(SCALARS, max_size=2), st.dictionaries(TEXT, SCALARS, max_size=2)
)
OPERATORS = st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"])


def _passes(value: dict[str, Any], tests: list[FieldTest]) -> bool:
    """Whether SQLite, running ``tests`` on the item's envelope, keeps it."""
    where = " AND ".join(t.sql()[0] for t in tests) or "1"
    args = [a for t in tests for a in t.sql()[1]]
    with closing(sqlite3.connect(":memory:")) as db:
        db.execute("CREATE TABLE srs (text TEXT)")
        db.execute("INSERT INTO srs VALUES (?)", (envelope(("a",), "k", value),))
        return db.execute(f"SELECT count(*) FROM srs WHERE {where}", args).fetchone()[0] == 1


@st.composite
def _value_and_filter(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    value = draw(st.dictionaries(st.sampled_from(KEYS), FIELDS, max_size=4))
    filter_: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(KEYS), max_size=3, unique=True)):
        # Often the value's own field, so that the filter matches; or a near number.
        near = value.get(key)
        if isinstance(near, int | float) and draw(st.booleans()):
            near = near + draw(st.sampled_from([0, 1e-12, -1e-12, 1, -1]))
        wanted = draw(st.one_of(st.just(near), SCALARS))
        ops = draw(st.lists(OPERATORS, max_size=2, unique=True))
        filter_[key] = dict.fromkeys(ops, wanted) if ops else wanted
    return value, filter_


@settings(max_examples=400, deadline=None)
@given(_value_and_filter())
@example(({"n": 2**63 + 1}, {"n": {"$lte": 2**63}}))  # Python compares as floats: equal
@example(({"n": 0.1}, {"n": 0.1}))
@example(({"n": 5e-324}, {"n": {"$gte": 5e-324}}))
@example(({"n": 1.7976931348623157e308}, {"n": 1.7976931348623157e308}))
@example(({"n": True}, {"n": 1.0}))
@example(({"a.b": "x"}, {"a.b": {"$gte": "x", "$lt": "y"}}))
@example(({"n": "😀"}, {"n": {"$gt": "\uffff"}}))  # code point order is UTF-8's byte order
def test_what_sql_checks_first_never_leaves_out_a_match(
    case: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    value, filter_ = case
    try:
        check_filter(filter_)  # a field of the value's own may look like an operator
    except ValueError:
        return
    if matches(value, filter_):
        assert _passes(value, narrowing(filter_)), (value, filter_, narrowing(filter_))


def test_sql_narrows_what_it_can_and_leaves_the_rest() -> None:
    tests = narrowing({"s": "kiwi", "n": {"$gte": 3, "$ne": 4}, "d": {"p": 1}, "o": None})
    assert [(t.key, t.op) for t in tests] == [("s", "="), ("n", ">=")]
    assert 3 - 1e-6 < float(tests[1].operand) < 3  # a little below: SQLite reads its own numbers
    assert narrowing({"n": math.inf, "m": 10**400, 'say "hi"': 1, "t": [1]}) == []
    for value, filter_ in [
        ({"n": 5}, {"n": {"$gte": 6}}),
        ({"n": 5}, {"n": 4}),
        ({"s": "kiwi"}, {"s": "lime"}),
        ({"s": "kiwi"}, {"s": {"$lt": "apple"}}),
        ({}, {"n": 1}),
    ]:
        assert not _passes(value, narrowing(filter_)), (value, filter_)
