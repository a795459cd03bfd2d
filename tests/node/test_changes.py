"""e_timeline action=changes (docs/tools/e_timeline.md §changes): what changed between two
moments, as one caller sees it.

- A table of timelines: each case plays writes, corrections, adjustments, local deletions and
  entries from another node at chosen times, then asks windows ``(since, as_of]`` of several
  readers and compares the whole answer (labels, change, fields or hidden_change, changed_at,
  newest first with ties by sr_id, and the ``as_of`` used).
- Paging: pages read one window (page 1's ``as_of``); entries authored later do not disturb
  it, entries that arrive late with an old clock do.
- Two nodes of one mesh fed the same entries in other orders and batchings answer alike; and
  hidden SRs that one of them never received change nothing a caller sees.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from node.access.callers import Caller
from node.errors import Refusal
from node.node import Node
from node.views.fold import lane_uuid_of
from protocol.clock import Hlc
from protocol.entry import Entry
from protocol.timefmt import format_instant, parse_instant
from tests.node.helpers import ForeignWriter, Wall, admit, sr_payload

SECOND = 1000
READ_WRITE = ("read:workspace", "write:workspace")
ADMIN = ("read:workspace", "write:workspace", "admin:workspace")
PAGE_NEEDS_AS_OF = (
    "a page after the first needs as_of: pass back the as_of page 1 returned, "
    "so every page reads the same window"
)
# Who may call: alice and bob write in "team", root administers it, carol only reads it, olga
# writes in another workspace.
PRINCIPALS = {
    "alice": ("team", READ_WRITE),
    "bob": ("team", READ_WRITE),
    "root": ("team", ADMIN),
    "carol": ("team", ("read:workspace",)),
    "olga": ("other", READ_WRITE),
}


async def callers_of(node: Node) -> dict[str, Caller]:
    out = {}
    for name, (workspace, scopes) in PRINCIPALS.items():
        issued = await node.create_token(name, workspace, scopes)
        out[name] = await node.authenticate(issued.token)
    return out


# -- the story: operations at chosen times ------------------------------------------------------


@dataclass(frozen=True)
class Op:
    t: int  # seconds after the story's base
    tool: str  # write, put, correct, adjust, delete, undelete, foreign
    who: str
    sr: str  # a label
    fields: dict[str, Any] = field(default_factory=dict)
    hlc_t: int | None = None  # foreign: the writer's clock, in seconds after the base


def write(t: int, who: str, sr: str, **fields: Any) -> Op:
    return Op(t, "write", who, sr, fields)


def put(t: int, who: str, sr: str, **fields: Any) -> Op:
    return Op(t, "put", who, sr, fields)


def correct(t: int, who: str, sr: str, **fields: Any) -> Op:
    return Op(t, "correct", who, sr, {"reason": "fix"} | fields)


def adjust(t: int, who: str, sr: str, **fields: Any) -> Op:
    return Op(t, "adjust", who, sr, fields)


def delete(t: int, who: str, sr: str) -> Op:
    return Op(t, "delete", who, sr)


def undelete(t: int, who: str, sr: str) -> Op:
    return Op(t, "undelete", who, sr)


def foreign(t: int, sr: str, hlc_t: int, **fields: Any) -> Op:
    """An entry of another node's log, received at ``t``, written by its clock at ``hlc_t``."""
    return Op(t, "foreign", "remote", sr, fields, hlc_t)


# An expected change: (label, change, fields or "hidden" for updated, changed_at in seconds).
Expected = tuple[str, str, "list[str] | str | None", int]


class Story:
    """Plays operations on a node at chosen moments and reads ``changes`` back in labels."""

    def __init__(self, node: Node, wall: Wall, callers: dict[str, Caller]) -> None:
        self.node, self.wall, self.callers = node, wall, callers
        self.base = wall.now + 60 * SECOND
        self.ids: dict[str, str] = {}
        self.writer = ForeignWriter(node.info.mesh, seed=b"\x31" * 32, epoch=b"\x02" * 8)
        self.foreign_n = 0

    def ms(self, t: int) -> int:
        return self.base + t * SECOND

    def iso(self, t: int) -> str:
        return format_instant(self.ms(t))

    def label(self, sr_id: str) -> str:
        (name,) = [k for k, v in self.ids.items() if v == sr_id]
        return name

    def _resolve(self, fields: dict[str, Any]) -> dict[str, Any]:
        out = dict(fields)
        if "links" in out:
            out["links"] = [self.ids[x] for x in out["links"]]
        return out

    async def play(self, *ops: Op) -> None:
        for op in ops:
            assert self.ms(op.t) >= self.wall.now, "a story's operations run forward in time"
            self.wall.now = self.ms(op.t)
            await self.apply(op)

    async def apply(self, op: Op) -> None:
        caller, fields = self.callers.get(op.who), self._resolve(op.fields)
        if op.tool == "write":
            assert op.sr not in self.ids
            self.ids[op.sr] = (await self.node.e_write(caller, **fields))["sr_id"]
        elif op.tool in ("put", "correct", "adjust"):
            tool = {"put": "e_write", "correct": "e_correct", "adjust": "e_adjust"}[op.tool]
            await getattr(self.node, tool)(caller, sr_id=self.ids[op.sr], **fields)
        elif op.tool in ("delete", "undelete"):
            done = await getattr(self.node, f"e_{op.tool}")(caller, sr_id=self.ids[op.sr])
            assert done["changed"] is True
        else:
            assert op.tool == "foreign"
            assert op.hlc_t is not None
            create = op.sr not in self.ids
            if create:
                self.foreign_n += 1
                self.ids[op.sr] = f"00000000-0000-7000-8000-{self.foreign_n:012d}"
            payload = sr_payload(self.ids[op.sr], create=create) | fields
            entry = self.writer.next("sr.put", payload, hlc=Hlc(self.ms(op.hlc_t), 0))
            report = await self.node.receive([entry], source="peer")
            assert report.stored == 1

    async def ask(self, who: str, since: int, as_of: int | None = None, **extra: Any) -> Any:
        args: dict[str, Any] = {"action": "changes", "since": self.iso(since)} | extra
        if as_of is not None:
            args["as_of"] = self.iso(as_of)
        return await self.node.e_timeline(self.callers[who], **args)

    def seen(self, answer: dict[str, Any]) -> list[tuple[str, str, Any, int]]:
        """The answer's changes in the table's terms, each change checked for its shape."""
        out = []
        for c in answer["changes"]:
            keys = {
                "sr_id",
                "change",
                "changed_at",
                "lane",
                "lane_uuid",
                "has_correction",
                "has_adjustment",
                "caller",
                "node_id",
            }
            assert isinstance(c["has_correction"], bool), c
            assert isinstance(c["has_adjustment"], bool), c
            assert isinstance(c["caller"], str), c
            assert isinstance(c["node_id"], str), c
            detail: Any = None
            if c["change"] == "updated":
                if "hidden_change" in c:
                    assert c["hidden_change"] is True, c
                    detail, keys = "hidden", keys | {"hidden_change"}
                else:
                    detail, keys = c["fields"], keys | {"fields"}
                    assert detail, c
            assert set(c) == keys, c
            out.append(
                (self.label(c["sr_id"]), c["change"], detail, parse_instant(c["changed_at"]).ms)
            )
        return out

    def expected(self, changes: list[Expected]) -> list[tuple[str, str, Any, int]]:
        """The table's expectation in the answer's order: newest changed_at first, ties by
        sr_id."""
        rows = [(sr, change, detail, self.ms(t)) for sr, change, detail, t in changes]
        return sorted(rows, key=lambda r: (-r[3], self.ids[r[0]]))


@dataclass(frozen=True)
class Ask:
    who: str
    since: int
    as_of: int | None  # None: the default, now
    changes: list[Expected]
    now: int | None = None  # the as_of a default answers, when not the wall clock


@dataclass(frozen=True)
class Case:
    ops: tuple[Op, ...]
    asks: tuple[Ask, ...]


# The table is laid out by hand: one line per operation and per question.
# fmt: off
CASES: dict[str, Case] = {
    "created before and updated inside: updated, with the fields that changed": Case(
        (
            write(1, "alice", "a", title="A", text="x"),
            write(1, "alice", "b", title="B"),
            write(1, "alice", "c", title="C"),
            write(2, "alice", "d", title="D", tags=["keep"]),
            put(5, "alice", "a", title="A2", tags=["t"]),
            correct(6, "alice", "b", text="fixed"),
            adjust(7, "alice", "c", lane="ops"),
            adjust(8, "alice", "d", tags=["keep"], content_time="2024-01-01T00:00:00Z"),
        ),
        (
            Ask("alice", 3, 10, [
                ("a", "updated", ["title", "tags"], 5),
                ("b", "updated", ["text", "has_correction"], 6),
                ("c", "updated", ["lane", "lane_uuid", "has_adjustment"], 7),
                ("d", "updated", ["content_time", "has_adjustment"], 8),
            ]),
            Ask("carol", 3, None, [
                ("a", "updated", ["title", "tags"], 5),
                ("b", "updated", ["text", "has_correction"], 6),
                ("c", "updated", ["lane", "lane_uuid", "has_adjustment"], 7),
                ("d", "updated", ["content_time", "has_adjustment"], 8),
            ]),
            Ask("alice", 5, 7, [
                ("b", "updated", ["text", "has_correction"], 6),
                ("c", "updated", ["lane", "lane_uuid", "has_adjustment"], 7),
            ]),
            Ask("olga", 0, 10, []),
        ),
    ),
    "changed_at is the newest entry in the window; fields compare the state at as_of": Case(
        (
            write(1, "alice", "a", title="A", text="x"),
            put(4, "alice", "a", title="A2"),
            put(6, "alice", "a", text="y"),
            put(12, "alice", "a", title="A3", conversational=True),
        ),
        (
            Ask("alice", 2, 8, [("a", "updated", ["title", "text"], 6)]),
            Ask("alice", 2, 5, [("a", "updated", ["title"], 4)]),
            Ask("alice", 4, 12, [("a", "updated", ["title", "text", "conversational"], 12)]),
            Ask("alice", 6, 11, []),
        ),
    ),
    "created inside: new": Case(
        (
            write(1, "alice", "old", title="before"),
            write(5, "alice", "a", title="A"),
            write(6, "bob", "b", title="B"),
            put(7, "alice", "b", text="more"),
            write(9, "bob", "c", title="C", visibility="private"),
        ),
        (
            Ask("alice", 3, 10, [("a", "new", None, 5), ("b", "new", None, 7)]),
            Ask("bob", 3, 10, [("a", "new", None, 5), ("b", "new", None, 7),
                               ("c", "new", None, 9)]),
            Ask("root", 6, 10, [("b", "updated", ["text"], 7), ("c", "new", None, 9)]),
            Ask("alice", 0, 10, [("old", "new", None, 1), ("a", "new", None, 5),
                                 ("b", "new", None, 7)]),
        ),
    ),
    "created and deleted inside: no change": Case(
        (
            write(4, "alice", "a", title="A"),
            write(5, "alice", "b", title="B"),
            put(5, "alice", "a", title="A2"),
            delete(6, "alice", "a"),
        ),
        (
            Ask("alice", 3, 10, [("b", "new", None, 5)]),
            Ask("alice", 3, 5, [("a", "new", None, 5), ("b", "new", None, 5)]),
            Ask("alice", 5, 10, [("a", "deleted", None, 6)]),
        ),
    ),
    "updated and reverted inside: no change": Case(
        (
            write(1, "alice", "a", title="A", tags=["x"]),
            write(1, "alice", "b", title="B"),
            put(4, "alice", "a", title="other", tags=["y"]),
            put(5, "alice", "b", title="B2"),
            put(6, "alice", "a", title="A"),
            put(7, "alice", "a", tags=["x"]),
        ),
        (
            Ask("alice", 3, 10, [("b", "updated", ["title"], 5)]),
            Ask("alice", 3, 6, [("a", "updated", ["tags"], 6), ("b", "updated", ["title"], 5)]),
        ),
    ),
    "deleted and undeleted across the boundary": Case(
        (
            write(1, "alice", "gone", title="G"),
            write(1, "alice", "back", title="B"),
            write(1, "alice", "blink", title="K"),
            write(1, "alice", "both", title="T"),
            write(1, "alice", "fixed", title="F"),
            delete(2, "alice", "back"),
            delete(4, "alice", "blink"),
            put(4, "alice", "both", title="T2"),
            delete(5, "alice", "gone"),
            undelete(6, "alice", "back"),
            undelete(6, "alice", "blink"),
            delete(7, "alice", "both"),
            delete(7, "alice", "fixed"),
            undelete(8, "alice", "fixed"),
            put(8, "alice", "fixed", title="F2"),
        ),
        (
            Ask("alice", 3, 10, [
                ("gone", "deleted", None, 5),
                ("back", "undeleted", None, 6),
                ("both", "deleted", None, 7),
                ("fixed", "updated", ["title"], 8),
            ]),
            Ask("carol", 3, 10, [
                ("gone", "deleted", None, 5),
                ("back", "undeleted", None, 6),
                ("both", "deleted", None, 7),
                ("fixed", "updated", ["title"], 8),
            ]),
            Ask("alice", 1, 4, [("back", "deleted", None, 2), ("blink", "deleted", None, 4),
                                ("both", "updated", ["title"], 4)]),
            Ask("alice", 5, 7, [("back", "undeleted", None, 6), ("blink", "undeleted", None, 6),
                                ("both", "deleted", None, 7), ("fixed", "deleted", None, 7)]),
            Ask("alice", 7, 9, [("fixed", "undeleted", None, 8)]),
        ),
    ),
    "since is exclusive and as_of inclusive": Case(
        (
            write(1, "alice", "b", title="B"),
            write(1, "alice", "d", title="D"),
            write(1, "alice", "f", title="F"),
            write(1, "alice", "g", title="G"),
            write(2, "alice", "a", title="A"),
            put(2, "alice", "b", title="B2"),
            delete(2, "alice", "f"),
            write(8, "alice", "c", title="C"),
            put(8, "alice", "d", title="D2"),
            delete(8, "alice", "g"),
            write(9, "alice", "e", title="E"),
        ),
        (
            Ask("alice", 2, 8, [("c", "new", None, 8), ("d", "updated", ["title"], 8),
                                ("g", "deleted", None, 8)]),
            Ask("alice", 1, 2, [("a", "new", None, 2), ("b", "updated", ["title"], 2),
                                ("f", "deleted", None, 2)]),
            Ask("alice", 8, 9, [("e", "new", None, 9)]),
            Ask("alice", 2, 7, []),
        ),
    ),
    "a private_fields-only change: hidden for other readers, named for the owner": Case(
        (
            write(1, "bob", "p", title="P", private_fields={"key": "one"}),
            write(1, "alice", "q", title="Q", private_fields={"key": "one"}),
            put(5, "bob", "p", private_fields={"key": "two"}),
            put(6, "alice", "q", private_fields={"key": "one"}),  # the same again: no change
        ),
        (
            Ask("alice", 3, 10, [("p", "updated", "hidden", 5)]),
            Ask("carol", 3, 10, [("p", "updated", "hidden", 5)]),
            Ask("bob", 3, 10, [("p", "updated", ["private_fields"], 5)]),
            Ask("root", 3, 10, [("p", "updated", ["private_fields"], 5)]),
        ),
    ),
    "workspace to private: omitted for a reader who cannot read it at as_of": Case(
        (
            write(1, "bob", "s", title="S"),
            write(1, "alice", "control", title="C"),
            adjust(5, "bob", "s", visibility="private"),
            put(5, "alice", "control", text="t"),
        ),
        (
            Ask("alice", 3, 10, [("control", "updated", ["text"], 5)]),
            Ask("bob", 3, 10, [("s", "updated", ["visibility", "has_adjustment"], 5),
                               ("control", "updated", ["text"], 5)]),
            Ask("root", 3, 10, [("s", "updated", ["visibility", "has_adjustment"], 5),
                                ("control", "updated", ["text"], 5)]),
            Ask("alice", 0, 4, [("s", "new", None, 1), ("control", "new", None, 1)]),
        ),
    ),
    "private to workspace: new for a reader who could not read it at since": Case(
        (
            write(1, "bob", "s", title="S", visibility="private"),
            adjust(5, "bob", "s", visibility="workspace"),
            adjust(6, "bob", "s", visibility="private"),
            adjust(7, "bob", "s", visibility="workspace"),
        ),
        (
            Ask("alice", 3, 5, [("s", "new", None, 5)]),
            Ask("carol", 3, 10, [("s", "new", None, 7)]),
            Ask("alice", 5, 6, []),
            Ask("bob", 3, 10, [("s", "updated", ["visibility", "has_adjustment"], 7)]),
            Ask("bob", 5, 10, []),
        ),
    ),
    "a link to an unreadable SR: hidden to whoever cannot read it, links to whoever can": Case(
        (
            write(1, "bob", "hid", title="H", visibility="private"),
            write(1, "bob", "pub", title="P"),
            write(1, "alice", "a", title="A"),
            write(1, "alice", "b", title="B"),
            put(5, "alice", "a", links=["hid"]),
            put(6, "alice", "b", links=["pub"]),
        ),
        (
            Ask("alice", 3, 10, [("a", "updated", "hidden", 5), ("b", "updated", ["links"], 6)]),
            Ask("carol", 3, 10, [("a", "updated", "hidden", 5), ("b", "updated", ["links"], 6)]),
            Ask("bob", 3, 10, [("a", "updated", ["links"], 5), ("b", "updated", ["links"], 6)]),
            Ask("root", 3, 10, [("a", "updated", ["links"], 5), ("b", "updated", ["links"], 6)]),
        ),
    ),
    "a link whose target turned unreadable, on an SR written again unchanged": Case(
        (
            write(1, "bob", "target", title="T"),
            write(1, "alice", "a", title="A", links=["target"]),
            adjust(5, "bob", "target", visibility="private"),
            put(6, "alice", "a", title="A"),  # the same title: the stored state is unchanged
        ),
        (
            # As alice sees it, a's links lost the target between the two moments
            # (docs/tools/e_timeline.md §changes: links filtered to the SRs the caller can
            # read), and a has an entry in the window.
            Ask("alice", 3, 10, [("a", "updated", ["links"], 6)]),
            Ask("carol", 3, 10, [("a", "updated", ["links"], 6)]),
            Ask("bob", 3, 10, [("target", "updated", ["visibility", "has_adjustment"], 5)]),
        ),
    ),
    "another workspace never shows": Case(
        (
            write(1, "alice", "mine", title="M"),
            write(5, "olga", "theirs", title="T"),
            put(6, "olga", "theirs", title="T2"),
        ),
        (
            Ask("alice", 0, 10, [("mine", "new", None, 1)]),
            Ask("root", 0, 10, [("mine", "new", None, 1)]),
            Ask("olga", 0, 10, [("theirs", "new", None, 6)]),
        ),
    ),
    "ties on changed_at are ordered by sr_id": Case(
        tuple(write(5, "alice", f"s{i}", title=f"S{i}") for i in range(6))
        + tuple(put(7, "alice", f"s{i}", text="x") for i in (4, 1, 5))
        + tuple(delete(7, "alice", f"s{i}") for i in (0, 3)),
        (
            Ask("alice", 0, 10, [("s2", "new", None, 5), ("s1", "new", None, 7),
                                 ("s4", "new", None, 7), ("s5", "new", None, 7)]),
            Ask("alice", 5, 10, [("s0", "deleted", None, 7), ("s1", "updated", ["text"], 7),
                                 ("s3", "deleted", None, 7), ("s4", "updated", ["text"], 7),
                                 ("s5", "updated", ["text"], 7)]),
            Ask("alice", 0, 5, [(f"s{i}", "new", None, 5) for i in range(6)]),
        ),
    ),
    "a future-dated entry takes effect when its time comes": Case(
        (
            write(4, "alice", "a", title="A"),
            foreign(5, "f", 3600, title="from the future"),
        ),
        (
            # An entry beyond max_clock_skew moves the node's clock not at all (docs/entries.md
            # §Clocks and the three times), so "now" is the wall clock, far before the entry.
            Ask("alice", 0, None, [("a", "new", None, 4)], now=5),
            Ask("alice", 0, 3599, [("a", "new", None, 4)]),
            Ask("alice", 0, 3600, [("a", "new", None, 4), ("f", "new", None, 3600)]),
            Ask("alice", 4, 7200, [("f", "new", None, 3600)]),
            Ask("alice", 3600, 7200, []),
        ),
    ),
    "entries from another node keep their writer's time": Case(
        (
            foreign(2, "f", 1, title="F"),
            write(3, "alice", "a", title="A"),
            foreign(9, "f", 4, text="late"),  # arrives at 9, written at 4
            foreign(9, "g", 2, title="G", visibility="private", principal="alice"),
        ),
        (
            Ask("alice", 0, 10, [("f", "new", None, 4), ("g", "new", None, 2),
                                 ("a", "new", None, 3)]),
            Ask("alice", 3, 10, [("f", "updated", ["text"], 4)]),  # g was there at 3
            Ask("bob", 0, 10, [("f", "new", None, 4), ("a", "new", None, 3)]),
            Ask("bob", 1, 3, [("a", "new", None, 3)]),
        ),
    ),
}
# fmt: on


@pytest_asyncio.fixture
async def story(node: Node, wall: Wall) -> Story:
    played = Story(node, wall, await callers_of(node))
    await admit(node, played.writer)
    return played


@pytest.mark.asyncio
@pytest.mark.parametrize("name", list(CASES))
async def test_changes_table(story: Story, wall: Wall, name: str) -> None:
    case = CASES[name]
    await story.play(*case.ops)
    for ask in case.asks:
        answer = await story.ask(ask.who, ask.since, ask.as_of)
        where = f"{ask.who} ({ask.since}, {ask.as_of}]"
        assert story.seen(answer) == story.expected(ask.changes), where
        now = story.iso(ask.now) if ask.now is not None else format_instant(wall.now)
        assert answer["as_of"] == (story.iso(ask.as_of) if ask.as_of is not None else now), where
        assert answer["since"] == story.iso(ask.since)
        assert (answer["action"], answer["page"], answer["has_more"]) == ("changes", 1, False)


@pytest.mark.asyncio
async def test_the_default_as_of_is_now_and_a_bare_date_is_midnight(
    story: Story, wall: Wall
) -> None:
    await story.play(write(1, "alice", "a", title="A"))
    wall.now = story.ms(3)
    answer = await story.ask("alice", 0)
    assert answer["as_of"] == story.iso(3)
    assert story.seen(answer) == story.expected([("a", "new", None, 1)])
    day = format_instant(story.ms(0))[:10]
    answer = await story.node.e_timeline(story.callers["alice"], action="changes", since=day)
    assert answer["since"] == f"{day}T00:00:00Z"
    assert story.seen(answer) == story.expected([("a", "new", None, 1)])


@pytest.mark.asyncio
async def test_lane_and_lane_uuid_are_the_srs_at_as_of(story: Story) -> None:
    await story.play(
        write(1, "alice", "a", title="A", lane="research"),
        adjust(5, "alice", "a", lane="ops"),
        adjust(7, "alice", "a", lane_uuid="01890000-0000-7000-8000-00000000abcd"),
    )
    (c,) = (await story.ask("alice", 0, 4))["changes"]
    assert (c["lane"], c["lane_uuid"]) == ("research", lane_uuid_of("team", "research"))
    (c,) = (await story.ask("alice", 3, 6))["changes"]
    assert (c["lane"], c["lane_uuid"]) == ("ops", lane_uuid_of("team", "ops"))
    assert c["fields"] == ["lane", "lane_uuid", "has_adjustment"]
    (c,) = (await story.ask("alice", 6, 8))["changes"]
    assert (c["lane"], c["lane_uuid"]) == ("ops", "01890000-0000-7000-8000-00000000abcd")
    assert c["fields"] == ["lane_uuid"]


def flags(answer: dict[str, Any], story: Story) -> dict[str, tuple[str, bool, bool]]:
    """Each entry's change and its (has_correction, has_adjustment), by label."""
    return {
        story.label(c["sr_id"]): (c["change"], c["has_correction"], c["has_adjustment"])
        for c in answer["changes"]
    }


@pytest.mark.asyncio
async def test_correction_and_adjustment_flags_are_the_srs_at_as_of(story: Story) -> None:
    """changes' entries flag has_correction / has_adjustment like the other actions' results
    — the SR's sticky flags at as_of, whatever the window saw happen (docs/tools/e_timeline.md
    §changes)."""
    await story.play(
        write(1, "alice", "corrected", title="C"),
        write(1, "alice", "adjusted", title="A"),
        write(1, "alice", "plain", title="P"),
        write(1, "alice", "later", title="L"),
        write(1, "bob", "private", title="V", private_fields={"k": "1"}),
        write(1, "alice", "gone", title="G"),
        correct(2, "alice", "gone", text="fixed before the window"),
        correct(5, "alice", "corrected", text="fixed"),
        adjust(5, "alice", "adjusted", tags=["t"]),
        put(5, "alice", "plain", title="P2"),
        put(5, "alice", "later", title="L2"),
        correct(5, "bob", "private", private_fields={"k": "2"}),
        delete(6, "alice", "gone"),
        correct(12, "alice", "later", text="fixed after as_of"),
        adjust(12, "alice", "plain", lane="ops"),
    )
    expected = {
        "corrected": ("updated", True, False),
        "adjusted": ("updated", False, True),
        "plain": ("updated", False, False),
        "later": ("updated", False, False),  # corrected at 12: not yet at as_of
        "private": ("updated", True, False),
        "gone": ("deleted", True, False),  # the fold's flags at as_of; deletion is local
    }
    for who in ("alice", "carol", "root"):
        assert flags(await story.ask(who, 3, 10), story) == expected, who
    # Before the window's changes: the same SRs, new, flagged as they were then.
    assert flags(await story.ask("alice", 0, 4), story) == {
        "corrected": ("new", False, False),
        "adjusted": ("new", False, False),
        "plain": ("new", False, False),
        "later": ("new", False, False),
        "private": ("new", False, False),
        "gone": ("new", True, False),
    }
    # Up to now, the flags are those list shows of the same SRs.
    now = flags(await story.ask("carol", 3), story)
    assert now["later"] == ("updated", True, False)
    assert now["plain"] == ("updated", False, True)
    listed = await story.node.e_timeline(story.callers["carol"], action="list", page_size=100)
    shown = {
        story.label(r["sr_id"]): (r["has_correction"], r["has_adjustment"])
        for r in listed["results"]
    }
    assert {k: v[1:] for k, v in now.items() if k != "gone"} == shown


# -- paging --------------------------------------------------------------------------------------


async def pages(story: Story, who: str, since: int, as_of: str, size: int) -> list[Any]:
    out, page = [], 1
    while True:
        answer = await story.node.e_timeline(
            story.callers[who],
            action="changes",
            since=story.iso(since),
            as_of=as_of,
            page=page,
            page_size=size,
        )
        assert answer["as_of"] == as_of
        assert answer["page"] == page
        out.append(answer)
        if not answer["has_more"]:
            return out
        assert len(answer["changes"]) == size
        page += 1


@pytest.mark.asyncio
async def test_pages_read_one_window(story: Story, wall: Wall) -> None:
    node, alice = story.node, story.callers["alice"]
    ops = [write(1 + i // 5, "alice", f"s{i}", title=f"S{i}") for i in range(24)]
    ops += [write(11, "alice", "brief", title="written and deleted inside")]
    for i in range(12):  # updates, two to a second: ties broken by sr_id across pages
        ops.append(put(11 + i // 2, "alice", f"s{i}", text=f"v{i}"))
    ops += [delete(14, "alice", f"s{i}") for i in range(12, 16)]
    ops += [correct(15, "alice", f"s{i}", title=f"fixed {i}") for i in range(16, 20)]
    ops += [delete(15, "alice", "brief")]
    ops += [write(16 + i // 3, "alice", f"n{i}", title=f"N{i}") for i in range(10)]
    ops.sort(key=lambda op: op.t)
    await story.play(*ops)
    wall.now = story.ms(20)

    first = await node.e_timeline(alice, action="changes", since=story.iso(10), page_size=7)
    as_of = first["as_of"]
    assert as_of == story.iso(20)
    whole = await node.e_timeline(
        alice, action="changes", since=story.iso(10), as_of=as_of, page_size=100
    )
    assert len(whole["changes"]) == 30
    assert whole["has_more"] is False
    got = await pages(story, "alice", 10, as_of, 7)
    assert got[0] == first
    assert [p["has_more"] for p in got] == [True] * 4 + [False]
    assert [c for p in got for c in p["changes"]] == whole["changes"]
    labels = [story.label(c["sr_id"]) for c in whole["changes"]]
    assert "brief" not in labels
    assert not {f"s{i}" for i in range(20, 24)} & set(labels)
    beyond = await node.e_timeline(
        alice, action="changes", since=story.iso(10), as_of=as_of, page=6, page_size=7
    )
    assert (beyond["changes"], beyond["has_more"]) == ([], False)

    with pytest.raises(Refusal) as refused:
        await node.e_timeline(alice, action="changes", since=story.iso(10), page=2, page_size=7)
    assert refused.value.text == PAGE_NEEDS_AS_OF

    # Entries authored after page 1 (a later wall) leave the window alone.
    await story.play(
        write(30, "alice", "after", title="later"),
        put(30, "alice", "s20", text="later"),
        put(31, "alice", "s0", title="later still"),
        delete(31, "alice", "n0"),
    )
    assert await pages(story, "alice", 10, as_of, 7) == got
    now = await node.e_timeline(alice, action="changes", since=story.iso(10), page_size=100)
    assert now["as_of"] == story.iso(31)
    assert now["changes"] != whole["changes"]  # the later entries are in a window up to now

    # An entry that arrives late with an old clock lands inside the window: a re-asked window
    # gains it, and its pages reshuffle.
    await story.play(
        foreign(32, "late", 15, title="arrived late"),
        foreign(32, "s21", 12, title="late but old"),
    )
    again = await node.e_timeline(
        alice, action="changes", since=story.iso(10), as_of=as_of, page_size=100
    )
    assert len(again["changes"]) == 32
    seen = story.seen(again)
    assert ("late", "new", None, story.ms(15)) in seen
    assert ("s21", "updated", ["title"], story.ms(12)) in seen
    assert [r for r in seen if r[0] not in ("late", "s21")] == story.seen(whole)
    re_paged = await pages(story, "alice", 10, as_of, 7)
    assert re_paged != got
    assert [c for p in re_paged for c in p["changes"]] == again["changes"]


# -- two nodes of one mesh ----------------------------------------------------------------------

ID = "00000000-0000-7000-8000-{:012d}".format


@dataclass
class Mesh:
    x: Node
    y: Node
    wall: Wall
    cx: dict[str, Caller]
    cy: dict[str, Caller]


@pytest_asyncio.fixture
async def mesh(tmp_path: Path, wall: Wall) -> AsyncIterator[Mesh]:
    await Node.init(tmp_path / "x", wall=wall)
    shutil.copytree(tmp_path / "x", tmp_path / "y")  # the same mesh, before either runs
    async with Node.open(tmp_path / "x", wall=wall) as x, Node.open(tmp_path / "y", wall=wall) as y:
        assert x.info.mesh == y.info.mesh
        yield Mesh(x, y, wall, await callers_of(x), await callers_of(y))


def shared_history(mesh: bytes, base: int) -> list[list[Entry]]:
    """Three writers' logs about eight SRs of "team": updates from several writers, clocks
    that interleave and tie, visibility flips, private fields, links (also to an SR nobody
    holds), and an entry from the future."""
    w = [
        ForeignWriter(mesh, seed=bytes([0x40 + i]) * 32, epoch=bytes([i + 1]) * 8) for i in range(3)
    ]

    def at(writer: int, s: float, kind: str, n: int, create: bool = False, **f: Any) -> None:
        body = {"sr_id": ID(n), "workspace": "team", "principal": f.pop("principal", "alice")}
        if kind == "sr.put":
            body["create"] = create
        if kind == "sr.correct":
            body["reason"] = "fix"
        w[writer].next(kind, body | f, hlc=Hlc(base + int(s * SECOND), 0))

    at(0, 1, "sr.put", 1, True, title="one", private_fields={"k": "a"})
    at(0, 2, "sr.put", 2, True, title="two", principal="bob")
    at(1, 2, "sr.put", 3, True, title="three", visibility="private", principal="bob")
    at(1, 3, "sr.put", 4, True, title="four", links=[ID(1)])
    at(2, 3, "sr.put", 5, True, title="five", visibility="private")
    at(0, 4, "sr.put", 1, text="from writer 0")
    at(1, 4, "sr.put", 1, text="from writer 1")  # the same clock: the writer key decides
    at(2, 5, "sr.adjust", 3, visibility="workspace", principal="bob")
    at(0, 6, "sr.put", 4, links=[ID(1), ID(3)])
    at(1, 6, "sr.correct", 2, title="two fixed")
    at(2, 7, "sr.put", 1, private_fields={"k": "b"})
    at(0, 8, "sr.adjust", 2, visibility="private", principal="bob")
    at(1, 8, "sr.put", 6, True, title="six", links=[ID(99)])
    at(2, 9, "sr.put", 6, links=[ID(99), ID(5)])
    at(0, 10, "sr.adjust", 5, tags=["t"], lane="ops")
    at(1, 11, "sr.put", 7, True, title="seven")
    at(2, 11.5, "sr.put", 7, title="seven again")
    at(0, 12, "sr.put", 8, True, title="eight")
    at(1, 12, "sr.adjust", 8, content_time=base)
    at(2, 13, "sr.put", 7, title="seven")
    at(1, 3600, "sr.put", 4, True, title="four from the future")
    at(0, 3601, "sr.put", 9, True, title="nine from the future")
    return [list(writer.entries) for writer in w]


async def answers(
    node: Node, callers: dict[str, Caller], who_all: tuple[str, ...], base: int
) -> list[Any]:
    """Every page (of 3) of every window of WINDOWS_MS, for each caller named."""
    out = []
    for who in who_all:
        for since, as_of in WINDOWS_MS:
            page, pages_ = 1, []
            while True:
                a = await node.e_timeline(
                    callers[who],
                    action="changes",
                    page=page,
                    page_size=3,
                    since=format_instant(base + since),
                    as_of=format_instant(base + as_of),
                )
                pages_.append(a)
                if not a["has_more"]:
                    break
                page += 1
            out.append((who, since, as_of, pages_))
    return out


WINDOWS_MS = [
    (0, 14_000),
    (1000, 4000),
    (2000, 6000),
    (4000, 8000),
    (5000, 12_000),
    (8000, 13_000),
    (11_000, 11_500),
    (0, 3_600_000),
    (12_000, 4_000_000),
]


@pytest.mark.asyncio
async def test_nodes_holding_the_same_entries_answer_alike(mesh: Mesh) -> None:
    base = mesh.wall.now - 60 * SECOND
    logs = shared_history(mesh.x.info.mesh, base)
    for node in (mesh.x, mesh.y):
        await admit(node, *(log[0].header.writer for log in logs))
    # X: each log whole, one after the other.  Y: every log's entries mixed, in batches of
    # random sizes, some reversed (they wait in the pending area until their gap fills).
    for log in logs:
        assert (await mesh.x.receive(log, source="a")).stored == len(log)
    rng = random.Random(7)
    queue = [list(log) for log in reversed(logs)]
    while any(queue):
        batch: list[Entry] = []
        for log in queue:
            take = rng.randint(0, 3)
            batch += log[:take]
            del log[:take]
        if rng.random() < 0.4:
            batch.reverse()
        await mesh.y.receive(batch, source=rng.choice(["b", "c"]))
    mesh.wall.now += 7 * SECOND  # and a moment later for both
    everyone = ("alice", "bob", "carol", "root")
    a = await answers(mesh.x, mesh.cx, everyone, base)
    b = await answers(mesh.y, mesh.cy, everyone, base)
    assert a == b
    # Not vacuous: every kind of answer occurs.
    flat = [c for *_, pages_ in a for p in pages_ for c in p["changes"]]
    kinds = {c["change"] for c in flat} | {"hidden" for c in flat if c.get("hidden_change")}
    assert kinds == {"new", "updated", "hidden"}
    assert any(len(pages_) > 1 for *_, pages_ in a)
    assert len(flat) > 60


@pytest.mark.asyncio
async def test_hidden_srs_change_nothing_a_caller_sees(mesh: Mesh) -> None:
    """X also holds SRs alice, bob and carol cannot read (another workspace; mallory's private
    SRs, also linked from a visible SR) that Y never received: both answer them alike."""
    base = mesh.wall.now - 60 * SECOND
    logs = shared_history(mesh.x.info.mesh, base)
    hidden = ForeignWriter(mesh.x.info.mesh, seed=b"\x55" * 32, epoch=b"\x09" * 8)
    for i, s in enumerate((1, 2, 2, 4, 6, 6, 8, 11.5, 12, 13)):
        n, hlc = 50 + i % 5, Hlc(base + int(s * SECOND), 0)
        body = {"sr_id": ID(n), "create": i < 5, "title": f"hidden {i}", "text": "secret"}
        if n % 2:
            body |= {"workspace": "other", "principal": "olga"}
        else:
            body |= {"workspace": "team", "principal": "mallory", "visibility": "private"}
        hidden.next("sr.put", body, hlc=hlc)
    # A visible SR that links to hidden ones: the links are filtered on X, absent on Y.
    linker = ForeignWriter(mesh.x.info.mesh, seed=b"\x56" * 32, epoch=b"\x0a" * 8)
    linker.next(
        "sr.put",
        {
            "sr_id": ID(70),
            "workspace": "team",
            "principal": "bob",
            "create": True,
            "title": "linker",
        },
        hlc=Hlc(base + 1500, 0),
    )
    linker.next(
        "sr.put",
        {
            "sr_id": ID(70),
            "workspace": "team",
            "principal": "bob",
            "create": False,
            "links": [ID(50), ID(52), ID(1)],
        },
        hlc=Hlc(base + 6500, 0),
    )
    for node in (mesh.x, mesh.y):
        await admit(node, *(log[0].header.writer for log in logs), linker, hidden)
    for log in [*logs, linker.entries]:
        await mesh.x.receive(log, source="a")
        await mesh.y.receive(log, source="a")
    await mesh.x.receive(hidden.entries, source="h")
    mesh.wall.now += 7 * SECOND
    a = await answers(mesh.x, mesh.cx, ("alice", "bob", "carol"), base)
    b = await answers(mesh.y, mesh.cy, ("alice", "bob", "carol"), base)
    assert a == b
    # Not vacuous: X's admin sees the hidden private SRs, Y's does not hold them.
    wide = format_instant(base), format_instant(base + 14_000)
    on_x = await mesh.x.e_timeline(
        mesh.cx["root"], action="changes", since=wide[0], as_of=wide[1], page_size=100
    )
    on_y = await mesh.y.e_timeline(
        mesh.cy["root"], action="changes", since=wide[0], as_of=wide[1], page_size=100
    )
    hidden_ids = {ID(n) for n in range(50, 55)}
    assert {c["sr_id"] for c in on_x["changes"]} & hidden_ids == {ID(50), ID(52), ID(54)}
    assert not {c["sr_id"] for c in on_y["changes"]} & hidden_ids
    # And the linker's change is the same hidden-or-named link change on both for alice.
    mine = [c for *_, p in a for page in p for c in page["changes"] if c["sr_id"] == ID(70)]
    assert mine
    assert all(c["change"] in ("new", "updated") for c in mine)
