"""What a search filter and a namespace condition match (docs/langgraph.md §Filters, §Reads):
``InMemoryStore``'s rules, and where it raises — an ordering operator on a missing or
non-numeric field — nothing matching instead.
"""

from __future__ import annotations

import pytest

from tests.extras import need

need("langgraph", module=True)

from langgraph.store.memory import InMemoryStore  # noqa: E402

from node.langgraph.filters import check_filter, matches, namespace_matches  # noqa: E402

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
