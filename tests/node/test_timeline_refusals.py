"""e_timeline's refusals (docs/tools/e_timeline.md §Refusals): its six specified texts exactly,
every other invalid call as ``Invalid timeline spec: …``, checks in the fixed order of
``timeline_spec``'s docstring (action; since/as_of outside changes; the changes rules in the
specification's order; each action's required argument; every other value), arguments equal to
their documented defaults counted as not sent, the read scope, and nothing stored by any refused
call.
"""

from __future__ import annotations

from typing import Any

import pytest
import pytest_asyncio

from node.access.callers import Caller
from node.errors import Forbidden, Refusal
from node.node import Node
from protocol.clock import Hlc
from tests.node.helpers import CallerFactory, ForeignWriter, Wall, admit, sr_payload, stored

SPEC = "Invalid timeline spec: "
BELONG = "'since' and 'as_of' belong to the changes action"
TAKES = "; it takes since, as_of, page and page_size"
PAGE_NEEDS_AS_OF = (
    "a page after the first needs as_of: pass back the as_of page 1 returned, "
    "so every page reads the same window"
)
SINCE_BEFORE = "'since' must be before 'as_of'"
SINCE_REQUIRED = "'since' is required for changes action"
READING = ("list", "find", "intersect", "traverse")
NEEDS = {
    "find": {"query": "q"},
    "intersect": {"match": ["m"]},
    "traverse": {"sr_id": "00000000-0000-7000-8000-000000000001"},
}


@pytest_asyncio.fixture
async def alice(node: Node, wall: Wall, make_caller: CallerFactory) -> Caller:
    caller = await make_caller("alice", "team", ("read:workspace", "write:workspace"))
    wall.now += 1000
    await node.e_write(caller, title="one", text="memo", tags=["a"])
    wall.now += 1000
    return caller


async def refused(node: Node, caller: Caller, **args: Any) -> str:
    """Call e_timeline, expect a Refusal, check nothing was stored; return the text."""
    before = await stored(node)
    with pytest.raises(Refusal) as info:
        await node.e_timeline(caller, **args)
    assert await stored(node) == before
    return info.value.text


# -- the specified refusals ------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("action", READING)
@pytest.mark.parametrize(
    "extra",
    [
        {"since": "2026-01-01"},
        {"as_of": "2026-01-01"},
        {"since": "2026-01-01", "as_of": "2026-02-01"},
        {"since": "not a date"},
    ],
)
async def test_since_and_as_of_belong_to_changes(
    node: Node, alice: Caller, action: str, extra: dict[str, str]
) -> None:
    assert await refused(node, alice, action=action, **NEEDS.get(action, {}), **extra) == BELONG


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("args", "named"),
    [
        ({"query": "q"}, "query"),
        ({"match": ["m"]}, "match"),
        ({"sr_id": "x"}, "sr_id"),
        ({"start_date": "2026-01-01"}, "start_date"),
        ({"end_date": "2026-01-01"}, "end_date"),
        ({"order_by": "content_time_asc"}, "order_by"),
        ({"shed_idf_noise": False}, "shed_idf_noise"),
        ({"is_conversational_only": True}, "is_conversational_only"),
        ({"agent_profile": "brief"}, "agent_profile"),
        # Several at once, named in the documented argument order whatever order they came in.
        (
            {
                "agent_profile": "p",
                "is_conversational_only": True,
                "order_by": "ingest_time_asc",
                "query": "q",
            },
            "query, order_by, is_conversational_only, agent_profile",
        ),
        (
            {"end_date": "x", "start_date": "y", "sr_id": "z", "match": "m"},
            "match, sr_id, start_date, end_date",
        ),
    ],
)
async def test_changes_does_not_take(
    node: Node, alice: Caller, args: dict[str, Any], named: str
) -> None:
    text = await refused(node, alice, action="changes", since="2026-01-01", **args)
    assert text == f"changes does not take {named}{TAKES}"


@pytest.mark.asyncio
@pytest.mark.parametrize("page", [2, 3, 10_000])
async def test_a_later_page_of_changes_needs_as_of(node: Node, alice: Caller, page: int) -> None:
    assert (
        await refused(node, alice, action="changes", since="2026-01-01", page=page)
        == PAGE_NEEDS_AS_OF
    )
    assert await refused(node, alice, action="changes", page=page) == PAGE_NEEDS_AS_OF


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("since", "as_of"),
    [
        ("2026-02-01", "2026-01-01"),
        ("2026-01-01", "2026-01-01"),  # since is exclusive, as_of inclusive: an empty window
        ("2026-01-01T00:00:00.001Z", "2026-01-01"),
        ("2026-01-01T01:00:00+01:00", "2026-01-01T00:00:00Z"),  # the same instant
    ],
)
async def test_since_must_be_before_as_of(
    node: Node, alice: Caller, since: str, as_of: str
) -> None:
    assert await refused(node, alice, action="changes", since=since, as_of=as_of) == SINCE_BEFORE
    assert (
        await refused(node, alice, action="changes", since=since, as_of=as_of, page=2)
        == SINCE_BEFORE
    )


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "extra",
    [{}, {"as_of": "2026-01-01"}, {"page_size": 5}, {"page": 2, "as_of": "2026-01-01T12:00:00Z"}],
)
async def test_since_is_required_for_changes(
    node: Node, alice: Caller, extra: dict[str, Any]
) -> None:
    assert await refused(node, alice, action="changes", **extra) == SINCE_REQUIRED


# -- Invalid timeline spec: … ------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("args", "detail"),
    [
        (
            {"action": "search"},
            "action must be one of list, find, intersect, traverse, changes, not 'search'",
        ),
        ({}, "action must be one of list, find, intersect, traverse, changes, not None"),
        (
            {"action": "LIST"},
            "action must be one of list, find, intersect, traverse, changes, not 'LIST'",
        ),
        ({"action": "find"}, "find needs query"),
        ({"action": "traverse"}, "traverse needs sr_id"),
        ({"action": "intersect"}, "intersect needs match"),
        (
            {"action": "find", "query": "  "},
            "query must be a non-empty string of at most 1000 characters",
        ),
        (
            {"action": "find", "query": "x" * 1001},
            "query must be a non-empty string of at most 1000 characters",
        ),
        ({"action": "intersect", "match": []}, "match must be a list of 1 to 16 non-empty strings"),
        (
            {"action": "intersect", "match": ["a", ""]},
            "match must be a list of 1 to 16 non-empty strings",
        ),
        (
            {"action": "intersect", "match": [str(i) for i in range(17)]},
            "match must be a list of 1 to 16 non-empty strings",
        ),
        (
            {"action": "list", "order_by": "newest"},
            "order_by must be one of ingest_time_desc, ingest_time_asc, content_time_desc, "
            "content_time_asc, not 'newest'",
        ),
        (
            {"action": "list", "start_date": "yesterday"},
            "start_date 'yesterday' is not a date or ISO-8601 datetime",
        ),
        (
            {"action": "list", "start_date": "2026-13-01"},
            "start_date '2026-13-01' is not a date or ISO-8601 datetime",
        ),
        (
            {"action": "list", "end_date": "2026-01-01T10:00:00"},
            "end_date '2026-01-01T10:00:00' is not a date or ISO-8601 datetime",
        ),
        (
            {"action": "list", "start_date": "2026-01-02", "end_date": "2026-01-02T00:00:00Z"},
            "start_date must be before end_date",
        ),
        ({"action": "list", "page": 0}, "page must be an integer from 1 to 10000"),
        ({"action": "list", "page": 10_001}, "page must be an integer from 1 to 10000"),
        ({"action": "list", "page": "2"}, "page must be an integer from 1 to 10000"),
        ({"action": "list", "page": True}, "page must be an integer from 1 to 10000"),
        ({"action": "list", "page_size": 101}, "page_size must be an integer from 1 to 100"),
        ({"action": "list", "page_size": 0}, "page_size must be an integer from 1 to 100"),
        ({"action": "list", "page_size": 2.0}, "page_size must be an integer from 1 to 100"),
        (
            {"action": "find", "query": "q", "shed_idf_noise": "false"},
            "shed_idf_noise must be true or false",
        ),
        ({"action": "list", "shed_idf_noise": 0}, "shed_idf_noise must be true or false"),
        (
            {"action": "list", "is_conversational_only": 1},
            "is_conversational_only must be true or false",
        ),
        ({"action": "list", "limit": 5}, "unknown argument limit"),
        ({"action": "list", "zeta": 1, "alpha": 2}, "unknown argument alpha, zeta"),
        ({"action": "changes", "since": "2026-01-01", "cursor": "x"}, "unknown argument cursor"),
        (
            {"action": "find", "query": "q", "start_date": "2026-01-01"},
            "find takes no window (start_date, end_date)",
        ),
        (
            {"action": "find", "query": "q", "end_date": "2026-01-01"},
            "find takes no window (start_date, end_date)",
        ),
        ({"action": "list", "agent_profile": "brief"}, "unknown agent_profile 'brief'"),
        (
            {"action": "changes", "since": "last week"},
            "since 'last week' is not a date or ISO-8601 datetime",
        ),
        (
            {"action": "changes", "since": "2026-01-01", "as_of": 20260101},
            "as_of 20260101 is not a date or ISO-8601 datetime",
        ),
        (
            {"action": "changes", "since": "2026-01-01", "page_size": 101},
            "page_size must be an integer from 1 to 100",
        ),
    ],
)
async def test_invalid_timeline_spec(
    node: Node, alice: Caller, args: dict[str, Any], detail: str
) -> None:
    assert await refused(node, alice, **args) == SPEC + detail


@pytest.mark.asyncio
async def test_an_unknown_or_unreadable_anchor_reads_as_unknown(
    node: Node, alice: Caller, make_caller: CallerFactory
) -> None:
    olga = await make_caller("olga", "other", ("read:workspace", "write:workspace"))
    theirs = (await node.e_write(olga, title="t", text="x"))["sr_id"]
    for anchor in ("00000000-0000-7000-8000-000000000001", theirs, "x" * 64):
        text = await refused(node, alice, action="traverse", sr_id=anchor)
        assert text == f"{SPEC}unknown sr_id: {anchor}"
    text = await refused(node, alice, action="traverse", sr_id="x" * 65)
    assert text == SPEC + "sr_id must be a non-empty string of at most 64 characters"


# -- the fixed order ---------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # 1. the action comes first.
        (
            {"action": "lst", "since": "2026-01-01", "page": 0},
            SPEC + "action must be one of list, find, intersect, traverse, changes, not 'lst'",
        ),
        # 2. since/as_of outside changes before anything about the action's own arguments.
        ({"action": "find", "since": "2026-01-01"}, BELONG),
        ({"action": "list", "as_of": "x", "page": 0, "order_by": "bad"}, BELONG),
        ({"action": "traverse", "since": "2026-01-01", "start_date": "nope"}, BELONG),
        (
            {"action": "find", "query": "q", "start_date": "2026-01-01", "as_of": "2026-01-01"},
            BELONG,
        ),
        # 3. the changes rules in the specification's order: what it does not take, first ...
        ({"action": "changes", "query": "q", "page": 2}, f"changes does not take query{TAKES}"),
        (
            {"action": "changes", "order_by": "x", "since": "2026-02-01", "as_of": "2026-01-01"},
            f"changes does not take order_by{TAKES}",
        ),
        ({"action": "changes", "match": ["m"]}, f"changes does not take match{TAKES}"),
        # ... then a later page without as_of ...
        ({"action": "changes", "page": 2, "since": "garbage"}, PAGE_NEEDS_AS_OF),
        ({"action": "changes", "page": 2, "page_size": 500}, PAGE_NEEDS_AS_OF),
        # ... then since not before as_of ...
        (
            {"action": "changes", "since": "2026-02-01", "as_of": "2026-01-01", "page_size": 0},
            SINCE_BEFORE,
        ),
        (
            {"action": "changes", "since": "2026-02-01", "as_of": "2026-01-01", "page": 0},
            SINCE_BEFORE,
        ),
        (
            {"action": "changes", "since": "2026-02-01", "as_of": "2026-01-01", "page": 2},
            SINCE_BEFORE,
        ),
        # ... then unreadable values ...
        (
            {"action": "changes", "as_of": "soon"},
            SPEC + "as_of 'soon' is not a date or ISO-8601 datetime",
        ),
        (
            {"action": "changes", "page_size": 0},
            SPEC + "page_size must be an integer from 1 to 100",
        ),
        ({"action": "changes", "page": 0}, SPEC + "page must be an integer from 1 to 10000"),
        # ... and since missing last.
        ({"action": "changes", "as_of": "2026-01-01", "page": 3}, SINCE_REQUIRED),
        # 4. each action's required argument before every other value.
        ({"action": "find", "page": 0, "order_by": "bad"}, SPEC + "find needs query"),
        ({"action": "intersect", "start_date": "bad"}, SPEC + "intersect needs match"),
        ({"action": "traverse", "agent_profile": "nope"}, SPEC + "traverse needs sr_id"),
        # 5. every other value.
        (
            {"action": "find", "query": "q", "page_size": 0, "order_by": "bad"},
            SPEC + "order_by must be one of ingest_time_desc, ingest_time_asc, content_time_desc, "
            "content_time_asc, not 'bad'",
        ),
    ],
)
async def test_checks_run_in_the_documented_order(
    node: Node, alice: Caller, args: dict[str, Any], expected: str
) -> None:
    assert await refused(node, alice, **args) == expected


# -- defaults count as not sent ----------------------------------------------------------------


DEFAULTS = {
    "order_by": "ingest_time_desc",
    "page": 1,
    "shed_idf_noise": True,
    "is_conversational_only": False,
}


@pytest.mark.asyncio
async def test_arguments_equal_to_their_defaults_count_as_not_sent(
    node: Node, alice: Caller
) -> None:
    # changes takes none of these, yet sent at their defaults they are not "sent".
    assert await refused(node, alice, action="changes", **DEFAULTS) == SINCE_REQUIRED
    assert (
        await refused(node, alice, action="changes", as_of="2026-01-01", **DEFAULTS)
        == SINCE_REQUIRED
    )
    for name, value in DEFAULTS.items():
        assert await refused(node, alice, action="changes", **{name: value}) == SINCE_REQUIRED
    # None counts as not sent too.
    assert (
        await refused(node, alice, action="changes", query=None, since=None, page=None)
        == SINCE_REQUIRED
    )
    assert (await node.e_timeline(alice, action="list", since=None, as_of=None))["results"]
    # A value of the default's type but another value is sent ...
    assert await refused(node, alice, action="changes", shed_idf_noise=False) == (
        f"changes does not take shed_idf_noise{TAKES}"
    )
    # ... and so is one of another type that compares equal (1 == True, 1.0 == 1).
    assert await refused(node, alice, action="changes", shed_idf_noise=1) == (
        f"changes does not take shed_idf_noise{TAKES}"
    )
    assert await refused(node, alice, action="changes", page=1.0) == (
        SPEC + "page must be an integer from 1 to 10000"
    )
    # The reading actions answer the same with and without the defaults.
    for action in READING[:3]:
        args = {"action": action, **NEEDS.get(action, {})}
        assert await node.e_timeline(alice, **args, **DEFAULTS) == await node.e_timeline(
            alice, **args
        )


# -- scope, and nothing stored -----------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.usefixtures("alice")
async def test_a_caller_without_read_scope_is_forbidden(
    node: Node, make_caller: CallerFactory
) -> None:
    writer = await make_caller("wendy", "team", ("write:workspace",))
    for args in (
        {"action": "list"},
        {"action": "find", "query": "memo"},
        {"action": "intersect", "match": ["a"]},
        {"action": "traverse", "sr_id": "00000000-0000-7000-8000-000000000001"},
        {"action": "changes", "since": "2026-01-01"},
    ):
        before = await stored(node)
        with pytest.raises(Forbidden):
            await node.e_timeline(writer, **args)
        assert await stored(node) == before
    admin = await make_caller("root", "team", ("admin:workspace",))
    assert len((await node.e_timeline(admin, action="list"))["results"]) == 1


@pytest.mark.asyncio
async def test_refused_calls_store_nothing_even_with_due_versions_waiting(
    node: Node, alice: Caller, wall: Wall
) -> None:
    # A future entry waits in sr_due; once its time has come, a refused call must not even
    # catch the views up (that is the first valid reading call's job).
    foreign = ForeignWriter(node.info.mesh)
    await admit(node, foreign)
    sr_id = "00000000-0000-7000-8000-000000000005"
    due = wall.now + 3_600_000
    entry = foreign.next("sr.put", sr_payload(sr_id, title="later"), hlc=Hlc(due, 0))
    assert (await node.receive([entry], source="peer")).stored == 1
    reader = node.reader()
    assert await reader.count("sr_due") == 1
    wall.now = due + 1
    before = await stored(node)
    for args in (
        {"action": "bogus"},
        {"action": "list", "page": 0},
        {"action": "changes", "query": "q"},
        {"action": "find"},
        {"action": "list", "since": "2026-01-01"},
    ):
        with pytest.raises(Refusal):
            await node.e_timeline(alice, **args)
    assert await stored(node) == before
    listed = (await node.e_timeline(alice, action="list"))["results"]
    assert [r["title"] for r in listed] == ["later", "one"]
    assert await reader.count("sr_due") == 0
