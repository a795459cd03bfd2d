"""Every refusal e_timeline answers is one of its texts (docs/tools/e_timeline.md §Refusals):
the six specified ones, ``Invalid timeline spec: <detail>`` for every other invalid call, and
the two of the turn's context (docs/time-windows.md: ``refused before dispatch: <code>``,
``invalid memlane/turn: <why>``).  Generated calls — e_timeline's arguments and unknown ones,
values of every JSON type, with and without the turn's context — go through a real node;
anything else it raises (another text, or an exception that is not a refusal) fails.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from node.access.callers import Caller
from node.errors import Refusal
from node.node import Node
from node.tools.timeline_spec import ACTIONS, ARGUMENTS, ORDERS
from tests.node.helpers import Wall
from tests.node.windowkit import LA_NAME, MIN, NOW, NOW_TEXT, M, T, rng

SEED_TEXTS = (
    "'since' and 'as_of' belong to the changes action",
    "a page after the first needs as_of: pass back the as_of page 1 returned, so every page "
    "reads the same window",
    "'since' must be before 'as_of'",
    "'since' is required for changes action",
)
ALLOWED = re.compile(
    "|".join(re.escape(t) for t in SEED_TEXTS)
    + r"|changes does not take [a-z_]+(, [a-z_]+)*; it takes since, as_of, page and page_size"
    + r"|Invalid timeline spec: .+|refused before dispatch: [a-z-]+|invalid memlane/turn: .+",
    re.DOTALL,
)
KNOWN = "known"  # stands for the SR the node holds; replaced by its id when called
UNKNOWN = "00000000-0000-7000-8000-000000000001"
MOMENTS = [
    "2026-10-09",
    "2026-10-01",
    "2026-10-10",
    "1969-12-31",
    "1970-01-01",
    "0001-01-01",
    "9999-12-31",
    "2026-10-09T15:00:00Z",
    "2026-10-09T15:40:00Z",
    "2026-10-09T16:00:00+02:00",
    "2026-10-09T15:00:00.5Z",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999Z",
    "2026-10-09T15:00:00",
    "2026-13-01",
    "yesterday",
    "",
    " ",
]
TEXTS = [*ACTIONS, *ORDERS, *MOMENTS, KNOWN, UNKNOWN, "x" * 65, "brief", "LIST", "memo", "a"]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.integers(0, 3),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(TEXTS),
    st.text(max_size=8),
)
VALUES = st.one_of(
    SCALARS,
    st.lists(SCALARS, max_size=3),
    st.dictionaries(st.text(max_size=4), SCALARS, max_size=2),
)
UNKNOWN_NAMES = st.sampled_from(["limit", "cursor", "caller", "self", "Action", ""])
GOOD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "since": st.sampled_from(MOMENTS),
    "as_of": st.sampled_from(MOMENTS),
    "start_date": st.sampled_from(MOMENTS),
    "end_date": st.sampled_from(MOMENTS),
    "sr_id": st.sampled_from([KNOWN, UNKNOWN]),
    "query": st.sampled_from(["memo", "a"]),
    "match": st.sampled_from([["memo"], "a"]),
    "order_by": st.sampled_from(ORDERS),
    "page": st.integers(1, 3),
    "page_size": st.integers(1, 3),
}


RARELY = st.sampled_from([False] * 9 + [True])  # shrinks to False: the common case


def rarely(draw: st.DrawFn) -> bool:
    return draw(RARELY)


@st.composite
def arguments(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly a known action with well-typed arguments and one or two of any value, so that
    most calls get past the first checks; now and then an unknown action or argument."""
    args: dict[str, Any] = {"action": draw(VALUES if rarely(draw) else st.sampled_from(ACTIONS))}
    for name in draw(st.lists(st.sampled_from(sorted(GOOD_VALUES)), max_size=3)):
        args[name] = draw(GOOD_VALUES[name])
    for name in draw(st.lists(st.sampled_from(ARGUMENTS[1:]), max_size=2)):
        args[name] = draw(VALUES)
    if rarely(draw):
        args[draw(UNKNOWN_NAMES)] = draw(VALUES)
    return args


def context(**more: Any) -> dict[str, Any]:
    return {"turn": 1, "toolCallId": "c1", "now": NOW_TEXT, "zone": LA_NAME} | more


def answered(r: dict[str, str]) -> dict[str, Any]:
    return {"source": "answered", "mention": 0, "range": r, "zone": LA_NAME}


GOOD_TURNS = st.sampled_from(
    [
        None,
        context(),
        context(windows=[answered(M)]),
        context(windows=[answered(T)]),
        context(open=[[M]]),
        context(windows=[{"source": "control", "lookback": "2d"}]),
        context(windows=[answered(rng("2026-10-08T00:00:00Z", "2026-10-09T00:00:00Z"))]),
    ]
)
BAD_TURNS = st.sampled_from([1, [], {"turn": 1}, context(zone="PST")])


@st.composite
def turns(draw: st.DrawFn) -> Any:
    return draw(BAD_TURNS if rarely(draw) else GOOD_TURNS)


class Opened:
    """One node for every example, on one event loop (opening a node per example would be
    most of the test's time)."""

    def __init__(self, path: Path) -> None:
        self.runner = asyncio.Runner()
        self.wall = Wall(NOW + 5 * MIN)
        self.runner.run(Node.init(path, wall=self.wall))
        (path / "config.toml").write_text("[profiles.brief]\npage_size = 2\n")
        self.opening = Node.open(path, wall=self.wall)
        self.node: Node = self.runner.run(self.opening.__aenter__())
        self.caller, self.known = self.runner.run(self._seed())

    async def _seed(self) -> tuple[Caller, str]:
        issued = await self.node.create_token(
            "alice", "team", ["read:workspace", "write:workspace"]
        )
        caller = await self.node.authenticate(issued.token)
        self.wall.now = NOW - 30 * MIN
        written = await self.node.e_write(caller, title="memo", tags=["a"])
        self.wall.now = NOW + 5 * MIN
        return caller, str(written["sr_id"])

    def answer(self, args: dict[str, Any], turn: Any) -> str | None:
        """The refusal text of the call, or None when it answered."""
        sent = {k: self.known if v == KNOWN else v for k, v in args.items()}
        try:
            self.runner.run(self.node.e_timeline(self.caller, **sent, turn=turn))
        except Refusal as refusal:
            return refusal.text
        return None

    def close(self) -> None:
        self.runner.run(self.opening.__aexit__(None, None, None))
        self.runner.close()


@pytest.fixture(scope="module")
def opened(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Opened]:
    node = Opened(tmp_path_factory.mktemp("refusal_texts") / "node")
    yield node
    node.close()


@settings(max_examples=400, deadline=None, derandomize=True)
@given(args=arguments(), turn=turns())
@example(args={"action": "list", "limit": 5}, turn=None)
@example(args={"action": "traverse", "sr_id": UNKNOWN}, turn=context())
@example(args={"action": "list", "start_date": "0001-01-01T00:00:00Z"}, turn=context())
@example(args={"action": "changes", "since": "2026-10-10"}, turn=context())
@example(args={"action": "list", "page": 2.5}, turn=context(windows=[answered(M)]))
def test_every_refusal_is_one_of_the_tools_texts(
    opened: Opened, args: dict[str, Any], turn: Any
) -> None:
    text = opened.answer(args, turn)
    assert text is None or ALLOWED.fullmatch(text), text
