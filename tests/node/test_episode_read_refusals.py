"""Refusals of the episode read tools (docs/tools/work_episode_chain.md,
docs/tools/episodes.md): each bad argument of work_episode_chain and work_episodes gets its
exact text and stores nothing; arguments are checked in a fixed order before the caller's
scopes, so a refusal never depends on what is stored; ``any_caller`` without
``admin:workspace`` is refused, never narrowed.
"""

from __future__ import annotations

from typing import Any

import pytest

from node.errors import Forbidden
from protocol.timefmt import format_instant
from tests.node.episode_helpers import NOW, UNKNOWN, listed, unavailable, walk
from tests.node.helpers import CallerFactory, refused, stored

ID_TEXT = "invalid id: must be a string of 1 to 256 characters"
K_TEXT = "invalid k: must be an integer from 1 to 200"
FLAG_TEXT = "invalid any_caller: must be true or false"
FORMAT_TEXT = "invalid response_format: must be one of concise, detailed"
VERBOSITY_TEXT = "invalid verbosity: must be one of full, terse"  # the specification's order
DISAGREE = "response_format and verbosity disagree; send response_format alone"
SHARED_BAD: list[tuple[dict[str, Any], str]] = [
    ({"any_caller": "yes"}, FLAG_TEXT),
    ({"any_caller": 1}, FLAG_TEXT),
    ({"any_caller": 0}, FLAG_TEXT),
    ({"any_caller": [True]}, FLAG_TEXT),
    ({"response_format": "terse"}, FORMAT_TEXT),
    ({"response_format": "full"}, FORMAT_TEXT),
    ({"response_format": "Concise"}, FORMAT_TEXT),
    ({"response_format": ""}, FORMAT_TEXT),
    ({"response_format": 1}, FORMAT_TEXT),
    ({"response_format": ["concise"]}, FORMAT_TEXT),
    ({"verbosity": "concise"}, VERBOSITY_TEXT),
    ({"verbosity": "detailed"}, VERBOSITY_TEXT),
    ({"verbosity": "Terse"}, VERBOSITY_TEXT),
    ({"verbosity": False}, VERBOSITY_TEXT),
    ({"response_format": "concise", "verbosity": "full"}, DISAGREE),
    ({"response_format": "detailed", "verbosity": "terse"}, DISAGREE),
]
CHAIN_BAD: list[tuple[dict[str, Any], str]] = [
    ({"bogus": 1}, "work_episode_chain does not take bogus"),
    ({"since": "2026-01-01", "page": 1}, "work_episode_chain does not take page, since"),
    ({"id": None}, ID_TEXT),
    ({"id": 5}, ID_TEXT),
    ({"id": ""}, ID_TEXT),
    ({"id": "x" * 257}, ID_TEXT),
    ({"id": [UNKNOWN]}, ID_TEXT),
    ({"id": b"abc"}, ID_TEXT),
    *[({"k": k}, K_TEXT) for k in (0, 201, -1, "5", 5.0, True, False, [5], 1 << 70)],
    *SHARED_BAD,
    # arguments are checked in a fixed order: names, id, k, any_caller, format
    ({"id": 5, "bogus": 1}, "work_episode_chain does not take bogus"),
    ({"id": 5, "k": 0}, ID_TEXT),
    ({"k": 0, "any_caller": "yes"}, K_TEXT),
    ({"any_caller": "yes", "response_format": "x"}, FLAG_TEXT),
]
TIME_TEXT = "must be an ISO-8601 instant or a YYYY-MM-DD date"
UNTIL_TEXT = "invalid until: must be after since"
STATUS_TEXT = "invalid status: must be a string of 1 to 64 characters"
TOOL_TEXT = "invalid tool: must be a string of 1 to 128 characters"
TAGS_TEXT = "invalid tags: must be a list of at most 16 tags of 1 to 64 characters"
PAGE_TEXT = "invalid page: must be an integer from 1 to 10000"
SIZE_TEXT = "invalid page_size: must be an integer from 1 to 100"
LIST_BAD: list[tuple[dict[str, Any], str]] = [
    ({"id": UNKNOWN}, "work_episodes does not take id"),
    ({"k": 5, "cursor": "x"}, "work_episodes does not take cursor, k"),
    ({"since": 5}, f"invalid since: {TIME_TEXT}"),
    ({"until": ["2026-09-21"]}, f"invalid until: {TIME_TEXT}"),
    (
        {"since": "yesterday"},
        "invalid since: 'yesterday' is not an ISO-8601 instant with an offset",
    ),
    ({"until": ""}, "invalid until: '' is not an ISO-8601 instant with an offset"),
    (
        {"until": "2026-10-09T08:00:00"},
        "invalid until: '2026-10-09T08:00:00' is not an ISO-8601 instant with an offset",
    ),
    ({"since": "2026-13-01"}, "invalid since: year or month out of range"),
    ({"since": "1969-12-31"}, "invalid since: must not be before 1970-01-01"),
    ({"since": "2026-09-22", "until": "2026-09-22"}, UNTIL_TEXT),
    ({"since": "2026-09-22T00:00:00Z", "until": "2026-09-21T23:59:59.999Z"}, UNTIL_TEXT),
    ({"since": "2026-09-22T02:00:00+02:00", "until": "2026-09-22"}, UNTIL_TEXT),
    ({"status": ""}, STATUS_TEXT),
    ({"status": 5}, STATUS_TEXT),
    ({"status": "s" * 65}, STATUS_TEXT),
    ({"tool": ""}, TOOL_TEXT),
    ({"tool": ["shell"]}, TOOL_TEXT),
    ({"tool": "t" * 129}, TOOL_TEXT),
    ({"tags": "ops"}, TAGS_TEXT),
    ({"tags": [""]}, TAGS_TEXT),
    ({"tags": ["x" * 65]}, TAGS_TEXT),
    ({"tags": [1]}, TAGS_TEXT),
    ({"tags": ["ok", None]}, TAGS_TEXT),
    ({"tags": [f"t{i}" for i in range(17)]}, TAGS_TEXT),
    ({"tags": ["ops"] * 17}, TAGS_TEXT),
    ({"tags": {"ops": 1}}, TAGS_TEXT),
    *[({"page": v}, PAGE_TEXT) for v in (0, 10_001, "1", 1.0, True)],
    *[({"page_size": v}, SIZE_TEXT) for v in (0, 101, "20", 2.5, False)],
    *SHARED_BAD,
    # the fixed order: names, since, until, status, tool, tags, until > since, page, page_size
    ({"since": 5, "bogus": 1}, "work_episodes does not take bogus"),
    ({"since": 5, "until": 5}, f"invalid since: {TIME_TEXT}"),
    ({"until": "x", "status": ""}, "invalid until: 'x' is not an ISO-8601 instant with an offset"),
    ({"status": "", "tags": "x"}, STATUS_TEXT),
    ({"tags": "x", "since": "2026-09-22", "until": "2026-09-21"}, TAGS_TEXT),
    ({"since": "2026-09-22", "until": "2026-09-21", "page": 0}, UNTIL_TEXT),
    ({"page": 0, "page_size": 0}, PAGE_TEXT),
    ({"page_size": 0, "any_caller": "yes"}, SIZE_TEXT),
]


@pytest.mark.asyncio
async def test_work_episode_chain_refuses_bad_input(node, make_caller):
    alice = await make_caller()
    # Arguments are checked before scopes: a caller who may not read gets the same texts.
    writer = await make_caller("carol", "team", ("write:workspace",))
    start = (await node.work_record(alice, summary="s"))["id"]
    for bad, text in CHAIN_BAD:
        args = {"id": start} | bad
        for who in (alice, writer):
            assert await refused(node, "work_episode_chain", who, **args) == text, bad


@pytest.mark.asyncio
async def test_work_episode_chain_needs_an_id(node, make_caller):
    alice = await make_caller()
    assert await refused(node, "work_episode_chain", alice) == ID_TEXT
    assert await refused(node, "work_episode_chain", alice, k=5) == ID_TEXT


@pytest.mark.asyncio
async def test_work_episodes_refuses_bad_input(node, make_caller):
    alice = await make_caller()
    writer = await make_caller("carol", "team", ("write:workspace",))
    await node.work_record(alice, summary="s", tags=["ops"])
    for args, text in LIST_BAD:
        for who in (alice, writer):
            assert await refused(node, "work_episodes", who, **args) == text, args


@pytest.mark.asyncio
async def test_reading_episodes_needs_the_read_scope(node, make_caller):
    alice = await make_caller()
    start = (await node.work_record(alice, summary="s"))["id"]
    writer = await make_caller("alice", "team", ("write:workspace",))
    text = "this call needs the read:workspace scope on workspace team"
    for start_id in (start, UNKNOWN):
        assert await refused(node, "work_episode_chain", writer, id=start_id) == text
        assert await refused(node, "work_episode_chain", writer, id=start_id, any_caller=True) == (
            text
        )
    assert await refused(node, "work_episodes", writer) == text
    assert await refused(node, "work_episodes", writer, any_caller=True) == text


@pytest.mark.asyncio
async def test_the_bounds_of_each_argument_are_accepted(node, make_caller: CallerFactory):
    alice = await make_caller()
    start = (await node.work_record(alice, summary="s", tags=["ops"]))["id"]
    long_id = "x" * 256
    assert await node.work_episode_chain(alice, id=long_id) == unavailable(long_id)
    for k in (1, 200, None):
        assert await walk(node, alice, start, k=k) == ([start], False)
    for args in (
        {"since": "1970-01-01", "until": format_instant(NOW + 1)},
        {"tags": ["ops"] * 16},
        {"status": "recorded", "tool": None, "page": 1},
        {"any_caller": None, "response_format": None, "verbosity": None},
    ):
        assert await listed(node, alice, **args) == [start]
    assert await listed(node, alice, tags=[f"t{i}" for i in range(16)]) == []
    assert await listed(node, alice, since=format_instant(NOW + 1)) == []
    assert await listed(node, alice, until=format_instant(NOW)) == []
    far = await node.work_episodes(alice, page=10_000, page_size=1)
    assert far == {"episodes": [], "page": 10_000, "page_size": 1, "has_more": False}


@pytest.mark.asyncio
async def test_any_caller_without_admin_is_refused_not_narrowed(node, make_caller):
    alice = await make_caller()
    mine = (await node.work_record(alice, summary="mine"))["id"]
    text = "any_caller needs the admin:workspace scope on workspace team"
    for start in (mine, UNKNOWN):
        before = await stored(node)
        with pytest.raises(Forbidden) as info:
            await node.work_episode_chain(alice, id=start, any_caller=True)
        assert info.value.text == text
        assert await stored(node) == before
    assert await refused(node, "work_episodes", alice, any_caller=True) == text
    elsewhere = await make_caller("alice", "lab", ("read:workspace",))
    assert await refused(node, "work_episodes", elsewhere, any_caller=True) == (
        "any_caller needs the admin:workspace scope on workspace lab"
    )
    assert await walk(node, alice, mine, any_caller=False) == ([mine], False)
