"""e_timeline action=changes against a brute-force model (docs/tools/e_timeline.md §changes).

Random histories of a few SRs — created, updated, corrected, adjusted (visibility flips
included), deleted and undeleted by two principals at random, non-decreasing times by a
hand-moved wall clock — and random windows ``(since, as_of]``.  For each reader, ``changes``
must equal the difference of two projected folds computed here from the operations alone:

- the state of an SR at T folds every entry of it with ingest wall ≤ T, in order (the entries
  are authored on one node, so authoring order is the fold order); its local deletion flag at
  T is the last delete/undelete stamped ≤ T;
- a reader sees an SR when it exists, is in the reader's workspace, and is of workspace
  visibility or the reader owns it or administers the workspace; ``private_fields`` only as
  its owner or an admin; ``links`` filtered to the SRs it can read at T (a target's local
  deletion does not filter it, as docs/tools/e_timeline.md §changes says);
- only SRs with an entry or a local deletion of their own in the window are reported (their
  ``changed_at`` is the newest of those), classified as the table of docs/tools/e_timeline.md
  §changes and ``_classify`` say:
  unreadable at as_of → omitted; unreadable at since → new (unless deleted at as_of); the
  deletion flag differs → deleted / undeleted; deleted at both → omitted; the projected states
  differ → updated with those fields; only the unprojected ones differ → hidden_change;
- each change names the SR's lane, lane_uuid, has_correction and has_adjustment at as_of.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from node.access.callers import Caller
from node.errors import Refusal
from node.node import Node
from node.views.fold import COMPARED, lane_uuid_of
from protocol.timefmt import format_instant, parse_instant
from tests.node.helpers import Wall

READ_WRITE = ("read:workspace", "write:workspace")
SCOPES = {
    "alice": READ_WRITE,
    "bob": READ_WRITE,
    "carol": ("read:workspace",),
    "root": ("read:workspace", "write:workspace", "admin:workspace"),
}
WRITERS = ("alice", "bob")
READERS = tuple(SCOPES)
ADMINS = frozenset({"root"})
LANE_UUID = "01890000-0000-7000-8000-00000000beef"
CONTENT_TIMES = ("2024-01-01T00:00:00Z", "2024-06-01T12:00:00Z")

# Small pools of values, so that writes often set what is already there and changes revert.
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "title": st.sampled_from(["a", "b"]),
    "text": st.sampled_from(["x", "y"]),
    "conversational": st.booleans(),
    "private_fields": st.sampled_from([{}, {"k": "1"}, {"k": "2"}]),
    "tags": st.sampled_from([[], ["t"], ["t", "u"]]),
    "links": st.lists(st.integers(0, 3), max_size=2),  # SR numbers, resolved when played
    "content_time": st.sampled_from(CONTENT_TIMES),
    "lane": st.sampled_from(["default", "ops"]),
    "lane_uuid": st.just(LANE_UUID),
    "visibility": st.sampled_from(["workspace", "private"]),
}
CONTENT = ("title", "text", "links", "conversational", "private_fields")
PUT = (*CONTENT, "tags")
META = ("tags", "content_time", "lane", "lane_uuid", "visibility")
DEFAULTS: dict[str, Any] = {
    "title": "",
    "text": "",
    "links": [],
    "conversational": False,
    "private_fields": {},
    "tags": [],
    "content_time": None,
    "lane": "default",
    "lane_uuid": None,
    "visibility": "workspace",
    "has_correction": False,
    "has_adjustment": False,
}


def fields_of(names: tuple[str, ...], min_size: int = 1) -> st.SearchStrategy[dict[str, Any]]:
    return st.sets(st.sampled_from(names), min_size=min_size).flatmap(
        lambda chosen: st.fixed_dictionaries({n: VALUES[n] for n in sorted(chosen)})
    )


_who = st.sampled_from(WRITERS)
# Who acts on an existing SR: its owner (twice as often) or the other writer.
_by = st.sampled_from(["owner", "owner", "other"])
_sr = st.integers(0, 3)
_delay = st.sampled_from([0, 1, 1, 2, 3])
CREATE = st.tuples(
    st.just("create"),
    _who,
    st.just(0),
    fields_of(
        (
            "text",
            "links",
            "conversational",
            "private_fields",
            "tags",
            "content_time",
            "lane",
            "visibility",
        ),
        0,
    ),
)
PUT_OP = st.tuples(st.just("put"), _by, _sr, fields_of(PUT))
CORRECT = st.tuples(st.just("correct"), _by, _sr, fields_of(CONTENT))
ADJUST = st.tuples(st.just("adjust"), _by, _sr, fields_of(META))
FLIP = st.tuples(st.just("adjust"), _by, _sr, fields_of(("visibility",)))
# One field alone: a private_fields or links change hidden from some readers, or a title
# written again as it was (an entry that changes nothing stored).
ONE = st.tuples(
    st.just("put"),
    _by,
    _sr,
    st.sampled_from(["private_fields", "links", "title"]).flatmap(lambda name: fields_of((name,))),
)
# "toggle" deletes an SR that is not deleted and undeletes one that is.
DELETE = st.tuples(
    st.sampled_from(["delete", "undelete", "toggle", "toggle"]), _by, _sr, st.just({})
)
# Later operations: mostly on SRs already there (creates are rarer), visibility flips and
# deletions often enough to cross windows.
OPS = st.one_of(CREATE, PUT_OP, ONE, ONE, CORRECT, ADJUST, FLIP, FLIP, DELETE, DELETE)
STEPS = st.tuples(
    st.lists(st.tuples(_delay, CREATE), min_size=2, max_size=4),
    st.lists(st.tuples(_delay, OPS), min_size=10, max_size=24),
).map(lambda parts: parts[0] + parts[1])
# A window's ends: near the time of an operation (index, then -1, 0 or +1 ms), or the end of
# the story; as_of may be left to its default.
_END = st.tuples(st.integers(0, 40), st.sampled_from([-1, 0, 0, 1]))
WINDOWS = st.lists(st.tuples(_END, _END, st.booleans()), min_size=1, max_size=4)


@dataclass
class Model:
    """What was done, by time: each SR's entries and its local deletion rows."""

    ids: list[str] = field(default_factory=list)
    owner: list[str] = field(default_factory=list)
    entries: list[list[tuple[str, int, dict[str, Any]]]] = field(default_factory=list)
    deletions: list[list[tuple[int, bool]]] = field(default_factory=list)
    times: list[int] = field(default_factory=list)  # of every operation tried

    def state(self, n: int, t: int) -> dict[str, Any] | None:
        """SR ``n`` folded at moment ``t`` (None before its creation)."""
        state: dict[str, Any] | None = None
        for kind, wall, values in self.entries[n]:
            if wall > t:
                break
            if kind == "create":
                state = DEFAULTS | values
                continue
            assert state is not None
            state |= values
            if kind == "correct":
                state["has_correction"] = True
            elif kind == "adjust":
                state["has_adjustment"] = True
        return state

    def deleted(self, n: int, t: int) -> bool:
        flags = [deleted for wall, deleted in self.deletions[n] if wall <= t]
        return bool(flags and flags[-1])

    def readable(self, n: int, t: int, reader: str) -> bool:
        state = self.state(n, t)
        return state is not None and (
            state["visibility"] == "workspace" or self.owner[n] == reader or reader in ADMINS
        )

    def raw(self, n: int, t: int) -> dict[str, Any] | None:
        """Everything ``changes`` compares, as nobody in particular sees it."""
        state = self.state(n, t)
        if state is None:
            return None
        out = {f: state[f] for f in COMPARED}
        out["lane_uuid"] = state["lane_uuid"] or lane_uuid_of("team", state["lane"])
        return out

    def seen(self, n: int, t: int, reader: str) -> dict[str, Any] | None:
        """What ``reader`` sees of SR ``n`` at ``t``: None when it cannot read it."""
        if not self.readable(n, t, reader):
            return None
        out = self.raw(n, t)
        assert out is not None
        if not (self.owner[n] == reader or reader in ADMINS):
            del out["private_fields"]
        out["links"] = [x for x in out["links"] if self.readable(self.ids.index(x), t, reader)]
        return out

    def touched(self, n: int, since: int, as_of: int) -> list[int]:
        walls = [w for _, w, _ in self.entries[n]] + [w for w, _ in self.deletions[n]]
        return [w for w in walls if since < w <= as_of]

    def changes(self, reader: str, since: int, as_of: int) -> list[tuple[Any, ...]]:
        out = []
        for n, sr_id in enumerate(self.ids):
            touched = self.touched(n, since, as_of)
            if not touched:
                continue
            a, b = self.seen(n, since, reader), self.seen(n, as_of, reader)
            d1, d2 = self.deleted(n, since), self.deleted(n, as_of)
            if b is None:
                continue
            if a is None:
                if d2:
                    continue
                change, detail = "new", None
            elif d1 != d2:
                change, detail = ("deleted" if d2 else "undeleted"), None
            elif d2:
                continue
            elif a != b:
                change, detail = "updated", [f for f in COMPARED if f in b and a[f] != b[f]]
            elif self.raw(n, since) != self.raw(n, as_of):
                change, detail = "updated", "hidden"
            else:
                continue
            out.append(
                (
                    max(touched),
                    sr_id,
                    change,
                    detail,
                    b["lane"],
                    b["lane_uuid"],
                    b["has_correction"],
                    b["has_adjustment"],
                )
            )
        out.sort(key=lambda c: (-c[0], c[1]))
        return out


def answered(answer: dict[str, Any]) -> list[tuple[Any, ...]]:
    out = []
    for c in answer["changes"]:
        detail = None
        if c["change"] == "updated":
            detail = "hidden" if c.get("hidden_change") else c["fields"]
        out.append(
            (
                parse_instant(c["changed_at"]).ms,
                c["sr_id"],
                c["change"],
                detail,
                c["lane"],
                c["lane_uuid"],
                c["has_correction"],
                c["has_adjustment"],
            )
        )
    return out


@dataclass(frozen=True)
class Template:
    root: Path
    tokens: dict[str, str]
    wall: int
    names: Iterator[int]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    """One initialised node with a token per principal, copied for every example."""
    root = tmp_path_factory.mktemp("changes_property")
    wall = Wall()

    async def make() -> dict[str, str]:
        await Node.init(root / "template", wall=wall)
        async with Node.open(root / "template", wall=wall) as node:
            return {p: (await node.create_token(p, "team", s)).token for p, s in SCOPES.items()}

    return Template(root, asyncio.run(make()), wall.now, itertools.count())


async def play(node: Node, wall: Wall, callers: dict[str, Caller], steps: list[Any]) -> Model:
    """Run the operations; each one the tools accept is recorded in the model."""
    m = Model()
    for delta, (op, who, n, args) in steps:
        wall.now += delta
        now, args = wall.now, dict(args)
        m.times.append(now)
        if op == "create":
            sr = len(m.ids)
            args = {"title": f"sr{sr}"} | args
        elif not m.ids:
            continue
        else:
            sr = n % len(m.ids)
            owner = m.owner[sr]
            who = owner if who == "owner" else next(w for w in WRITERS if w != owner)
            if op == "toggle":
                op = "undelete" if m.deleted(sr, now) else "delete"
        caller = callers[who]
        values = dict(args)
        if "links" in args:
            args["links"] = list(
                dict.fromkeys(m.ids[i % len(m.ids)] for i in args["links"] if m.ids)
            )
            values["links"] = list(args["links"])
        if "content_time" in args:
            values["content_time"] = parse_instant(args["content_time"]).ms
        if op == "create":
            m.ids.append((await node.e_write(caller, **args))["sr_id"])
            m.owner.append(who)
            m.entries.append([("create", now, values)])
            m.deletions.append([])
            continue
        sr_id = m.ids[sr]
        tool = {"put": "e_write", "correct": "e_correct", "adjust": "e_adjust"}.get(op, f"e_{op}")
        if op == "correct":
            args["reason"] = "r"
        # Which calls the tools accept (docs/authority.md): an SR the caller cannot read, or
        # a deleted one, is unknown to it; adjust, delete and undelete are the owner's.
        allowed = m.readable(sr, now, who) and (m.owner[sr] == who or op in ("put", "correct"))
        if not allowed or (m.deleted(sr, now) and op not in ("delete", "undelete")):
            with pytest.raises(Refusal) as refused:
                await getattr(node, tool)(caller, sr_id=sr_id, **args)
            assert refused.value.text == f"unknown sr_id: {sr_id}", (op, who)
            continue
        done = await getattr(node, tool)(caller, sr_id=sr_id, **args)
        if op in ("delete", "undelete"):
            changed = m.deleted(sr, now) != (op == "delete")
            assert done["changed"] is changed
            if changed:  # an unchanged flag writes no row
                m.deletions[sr].append((now, op == "delete"))
        else:
            assert done["ingest_time"] == format_instant(now)
            m.entries[sr].append((op, now, values))
    return m


async def run_example(template: Template, steps: list[Any], windows: list[Any], idle: int) -> None:
    path = template.root / f"ex{next(template.names)}"
    shutil.copytree(template.root / "template", path)
    try:
        wall = Wall(template.wall + 10_000)
        async with Node.open(path, wall=wall) as node:
            callers = {p: await node.authenticate(t) for p, t in template.tokens.items()}
            model = await play(node, wall, callers, steps)
            wall.now += idle
            moments = sorted(set(model.times) | {wall.now})
            for (i, di), (j, dj), default in windows:
                since = moments[i % len(moments)] + di
                as_of = moments[j % len(moments)] + dj
                args = {"action": "changes", "since": format_instant(since), "page_size": 100}
                if default:
                    as_of = wall.now
                else:
                    args["as_of"] = format_instant(as_of)
                if since >= as_of:
                    continue
                for reader in READERS:
                    answer = await node.e_timeline(callers[reader], **args)
                    assert answer["as_of"] == format_instant(as_of)
                    assert answer["has_more"] is False
                    want = model.changes(reader, since, as_of)
                    assert answered(answer) == want, (reader, since, as_of, model)
    finally:
        shutil.rmtree(path)


# A link whose target turns unreadable, on an SR written again without change: as a reader
# other than bob sees it, sr1's links lost sr0 (found by this test; now always tried).
LINK_TURNS_UNREADABLE = [
    (0, ("create", "bob", 0, {})),
    (0, ("create", "alice", 0, {"links": [0]})),
    (2, ("adjust", "owner", 0, {"visibility": "private"})),
    (0, ("put", "owner", 1, {"title": "sr1"})),
]


@settings(max_examples=100, deadline=None, derandomize=True)
@given(steps=STEPS, windows=WINDOWS, idle=st.sampled_from([0, 1, 5]))
@example(steps=LINK_TURNS_UNREADABLE, windows=[((0, 0), (1, 0), False)], idle=0)
def test_changes_is_the_difference_of_two_projected_folds(
    template: Template, steps: list[Any], windows: list[Any], idle: int
) -> None:
    asyncio.run(run_example(template, steps, windows, idle))
