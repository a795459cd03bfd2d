"""Non-interference (docs/authority.md §Why nothing leaks): what a caller may not read changes
nothing it sees.

The test is differential.  Three nodes of one mesh hold the same corpus (workspace ``team``,
sealed by writer A) and differ only in rows their callers may not read:

- **X** also holds writer B's SRs of workspace ``other`` and writer M's private ``team`` SRs of
  ``mallory`` (both reuse the corpus vocabulary, repeat its rare term many times, link to corpus
  SRs and carry private fields);
- **Y** never received B or M;
- **Z** received M only.

The same calls against X and Y (callers who can read neither B nor M), and against X and Z
(an admin of ``team`` and mallory, who read M but not B), must answer identically — results,
order, counts, page boundaries, ``has_more``, ``shed_terms``, refusals, for list, find,
intersect, traverse and changes — and ``e_audit`` must list the same events once seq values
are set aside (their one documented exception): the same subjects, entry ids and times.
Every entry is sealed by a foreign writer, so X, Y and Z hold the very same visible entries.
The entries arrive in rounds, as over a mesh, shortly after they were written: on X each
round's hidden entries come first, many written after that round's corpus entries.  The last
two rounds come as bundles — hidden and visible entries in one import, and an import whose
corpus entries come without their content, filled in by the next.  Then the shared wall clock
stops, so every question is asked at the same moment on every node.

The last tests show that the comparisons tell the nodes apart for callers who read the
difference, and that they catch a leak injected into what a bundle import shows.
"""

from __future__ import annotations

import asyncio
import random
import shutil
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.access.callers import Caller
from node.errors import NodeError
from node.node import Node
from node.tools import audit as audit_tool
from protocol.bundle import BundleHeader, BundleWriter
from protocol.clock import Hlc
from protocol.frontier import Frontier
from protocol.timefmt import format_instant
from tests.node.helpers import ForeignWriter, Wall, admit
from tests.node.webkit import ask, served

# -- the moment, the vocabulary --------------------------------------------------------------------

BASE = 1_790_000_000_000  # 2026-09-21T14:13:20Z
MINUTE, DAY = 60_000, 86_400_000
NOW = BASE + 8 * DAY  # every node's wall clock: after every entry, so nothing waits

WORDS = (
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "theta",
    "kappa",
    "lambda",
    "sigma",
    "omega",
    "common",
    "rare",
)
FILLER = ("note", "plan", "review", "draft", "meeting", "result")
TAGS = ("ops", "research", "urgent", "alpha", "rare-tag", "q3")
LANES = ("default", "research", "ops")
RARE = "rare"

PROFILES = """
[profiles.desk]
page_size = 7
lanes = ["research", "ops"]

[profiles.recent]
order_by = "content_time_asc"
"""


def _sr_id(kind: int, n: int) -> str:
    return f"0000000{kind:x}-0000-7000-8000-{n:012x}"


CORPUS, OTHER, MALLORY, UNKNOWN = 0xA, 0xB, 0xC, 0xD
CORPUS_N, OTHER_N, MALLORY_N = 180, 130, 110
CORPUS_IDS = [_sr_id(CORPUS, i) for i in range(CORPUS_N)]
OTHER_IDS = [_sr_id(OTHER, i) for i in range(OTHER_N)]
MALLORY_IDS = [_sr_id(MALLORY, i) for i in range(MALLORY_N)]
UNKNOWN_IDS = [_sr_id(UNKNOWN, i) for i in range(20)]


# -- the entries -----------------------------------------------------------------------------------


def _text(rng: random.Random, n: int, *, rare_every: int = 0) -> str:
    words: list[str] = []
    for _ in range(n):
        pick = rng.random()
        words.append(rng.choice(WORDS[:11]) if pick < 0.55 else rng.choice(FILLER))
    if rng.random() < 0.8:
        words.insert(rng.randrange(len(words) + 1), "alpha")
    if rng.random() < 0.75:
        words.insert(rng.randrange(len(words) + 1), "common")
    if rare_every:
        words += [RARE] * rare_every
    rng.shuffle(words)
    return " ".join(words)


def _content_time(rng: random.Random) -> dict[str, Any]:
    if rng.random() < 0.3:
        return {}
    return {"content_time": BASE + rng.randrange(-10 * DAY, 6 * DAY)}


def _corpus(rng: random.Random) -> list[tuple[str, dict[str, Any]]]:
    """Writer A's entries: the shared corpus of workspace team."""
    out: list[tuple[str, dict[str, Any]]] = []
    owners: dict[str, str] = {}
    for i, sr_id in enumerate(CORPUS_IDS):
        owner = rng.choices(("alice", "bob", "carol"), (2, 1, 1))[0]
        owners[sr_id] = owner
        payload: dict[str, Any] = {
            "sr_id": sr_id,
            "workspace": "team",
            "principal": owner,
            "create": True,
            "title": " ".join(rng.sample(WORDS[:11] + FILLER, rng.randint(1, 4))),
            "text": _text(rng, rng.randint(2, 45), rare_every=int(rng.random() < 0.05)),
            "tags": rng.sample(TAGS, rng.randint(0, 3)),
            "lane": rng.choice(LANES),
            "conversational": rng.random() < 0.2,
            "visibility": "private" if rng.random() < 0.12 else "workspace",
        } | _content_time(rng)
        if i and rng.random() < 0.3:
            payload["links"] = rng.sample(CORPUS_IDS[:i], min(i, rng.randint(1, 3)))
        if rng.random() < 0.15:
            payload["private_fields"] = {"note": _text(rng, 5)}
        out.append(("sr.put", payload))
    for sr_id in rng.sample(CORPUS_IDS, 12):
        out.append(
            (
                "sr.correct",
                {
                    "sr_id": sr_id,
                    "workspace": "team",
                    "principal": owners[sr_id],
                    "reason": "typo",
                    "text": _text(rng, rng.randint(3, 30)),
                },
            )
        )
    for sr_id in rng.sample(CORPUS_IDS, 12):
        out.append(
            (
                "sr.adjust",
                {
                    "sr_id": sr_id,
                    "workspace": "team",
                    "principal": owners[sr_id],
                    "tags": rng.sample(TAGS, 2),
                    "lane": rng.choice(LANES),
                    "visibility": rng.choice(("workspace", "private")),
                }
                | _content_time(rng),
            )
        )
    for sr_id in rng.sample(CORPUS_IDS, 6):
        out.append(
            (
                "sr.put",
                {
                    "sr_id": sr_id,
                    "workspace": "team",
                    "principal": owners[sr_id],
                    "create": False,
                    "title": "review " + rng.choice(WORDS),
                    "links": rng.sample(CORPUS_IDS, 2),
                },
            )
        )
    return out


def _hidden(
    rng: random.Random,
    ids: list[str],
    workspace: str,
    owners: tuple[str, ...],
    visibility: str | None,
) -> list[tuple[str, dict[str, Any]]]:
    """Entries that touch only ``ids``: the corpus vocabulary, its rare term many times over,
    long texts, the corpus tags and lanes, links into the corpus, private fields.  With no
    ``visibility``, a mix (SRs of another workspace owned by a reader of this one, too)."""
    out: list[tuple[str, dict[str, Any]]] = []
    owner_of: dict[str, str] = {}
    for sr_id in ids:
        owner = rng.choice(owners)
        owner_of[sr_id] = owner
        payload: dict[str, Any] = {
            "sr_id": sr_id,
            "workspace": workspace,
            "principal": owner,
            "create": True,
            "title": f"{RARE} " + " ".join(rng.sample(WORDS, 3)),
            "text": _text(rng, rng.randint(20, 160), rare_every=rng.randint(3, 40)),
            "tags": rng.sample(TAGS, rng.randint(1, 4)),
            "lane": rng.choice(LANES),
            "conversational": rng.random() < 0.4,
            "visibility": visibility or rng.choice(("workspace", "private")),
            "links": rng.sample(CORPUS_IDS, 3) + rng.sample(ids, 1),
            "private_fields": {"secret": f"{RARE} " + _text(rng, 8)},
        } | _content_time(rng)
        out.append(("sr.put", payload))
    for sr_id in rng.sample(ids, 15):
        out.append(
            (
                "sr.correct",
                {
                    "sr_id": sr_id,
                    "workspace": workspace,
                    "principal": owner_of[sr_id],
                    "reason": "more",
                    "text": _text(rng, 60, rare_every=25),
                },
            )
        )
    for sr_id in rng.sample(ids, 15):
        out.append(
            (
                "sr.adjust",
                {
                    "sr_id": sr_id,
                    "workspace": workspace,
                    "principal": owner_of[sr_id],
                    "tags": [RARE, *rng.sample(TAGS, 2)],
                    "lane": rng.choice(LANES),
                }
                | _content_time(rng),
            )
        )
    for sr_id in rng.sample(ids, 10):
        out.append(
            (
                "sr.put",
                {
                    "sr_id": sr_id,
                    "workspace": workspace,
                    "principal": owner_of[sr_id],
                    "create": False,
                    "links": rng.sample(CORPUS_IDS, 5),
                },
            )
        )
    return out


def _seal(
    writer: ForeignWriter, items: list[tuple[str, dict[str, Any]]], *, offset: int, span: int
) -> list[Any]:
    """Seal ``items`` with walls spread evenly over ``span`` from BASE + ``offset``."""
    step = span // len(items)
    return [
        writer.next(kind, payload, hlc=Hlc(BASE + offset + i * step, 0))
        for i, (kind, payload) in enumerate(items)
    ]


def _rounds(entries: list[Any], n: int) -> list[list[Any]]:
    size = -(-len(entries) // n)
    return [entries[i : i + size] for i in range(0, len(entries), size)]


# -- the mesh --------------------------------------------------------------------------------------

Outcome = tuple[Any, ...]
ROLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "alice": ("team", ("read:workspace", "write:workspace")),
    "bob": ("team", ("read:workspace",)),
    "carol": ("team", ("write:workspace",)),  # may not read: every read is refused
    "root": ("team", ("admin:workspace",)),
    "mallory": ("team", ("read:workspace", "write:workspace")),
    "eve": ("other", ("read:workspace",)),  # reads B: only the sanity tests use her
}
# (hidden-rich node, hidden-poor node, callers for whom the difference is unreadable)
PAIRS = (("X", "Y", ("alice", "bob", "carol")), ("X", "Z", ("root", "mallory")))


@dataclass
class Mesh:
    loop: asyncio.AbstractEventLoop
    nodes: dict[str, Node] = field(default_factory=dict)
    callers: dict[tuple[str, str], Caller] = field(default_factory=dict)
    feeds: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    calls: int = 0

    def run(self, coro: Awaitable[Any]) -> Any:
        return self.loop.run_until_complete(coro)

    async def outcome(self, node: str, who: str, tool: str, args: dict[str, Any]) -> Outcome:
        """The answer, or the refusal's type and text."""
        self.calls += 1
        method: Callable[..., Awaitable[dict[str, Any]]] = getattr(self.nodes[node], tool)
        try:
            return ("answer", await method(self.callers[node, who], **args))
        except NodeError as exc:
            return ("refused", type(exc).__name__, str(exc))

    async def differences(
        self, tool: str, args: dict[str, Any], pairs: Any = PAIRS
    ) -> list[tuple[str, str, str, Outcome, Outcome]]:
        """Every (rich, poor, caller) whose two answers to ``args`` differ."""
        out = []
        for rich, poor, callers in pairs:
            for who in callers:
                a = await self.outcome(rich, who, tool, args)
                b = await self.outcome(poor, who, tool, args)
                if a != b:
                    out.append((rich, poor, who, a, b))
        return out


async def _build(root: Path, stack: AsyncExitStack) -> Mesh:
    wall = Wall(BASE - DAY)  # the nodes start before the entries were written
    info = await Node.init(root / "X", wall=wall)
    writers = [ForeignWriter(info.mesh, seed=bytes([seed]) * 32) for seed in (0x0A, 0x0B, 0x0C)]
    async with Node.open(root / "X", wall=wall) as x:
        await admit(x, *writers)  # every node holds the authority's member.adds
    (root / "X" / "config.toml").write_text(PROFILES)
    for name in ("Y", "Z"):
        shutil.copytree(root / "X", root / name)
    mesh = Mesh(asyncio.get_running_loop())
    for name in ("X", "Y", "Z"):
        mesh.nodes[name] = await stack.enter_async_context(Node.open(root / name, wall=wall))
    rng = random.Random(20260921)
    span = 6 * DAY
    a = _seal(writers[0], _corpus(rng), offset=0, span=span)
    b = _seal(
        writers[1],
        _hidden(rng, OTHER_IDS, "other", ("olga", "alice", "bob"), None),
        offset=7 * MINUTE,
        span=span,
    )
    m = _seal(
        writers[2],
        _hidden(rng, MALLORY_IDS, "team", ("mallory",), "private"),
        offset=3 * MINUTE,
        span=span,
    )
    # Rounds of a mesh, each delivered a minute after its newest entry was written.  On X the
    # hidden entries of a round arrive first, many of them written after the round's corpus
    # entries: a node clock that followed them would show in the corpus events' times.  The
    # last two rounds come by bundle: one bundle each, then one whose corpus entries come
    # without their content and a second that fills it in.
    rounds = list(zip(_rounds(a, 8), _rounds(b, 8), _rounds(m, 8), strict=True))
    for i, (ra, rb, rm) in enumerate(rounds):
        wall.now = max(e.header.hlc.wall for e in (*ra, *rb, *rm)) + MINUTE
        for name, batches in (("X", (rb, rm, ra)), ("Y", (ra,)), ("Z", (rm, ra))):
            node = mesh.nodes[name]
            if i < 6:
                for batch in batches:
                    report = await node.receive(batch, source="peer-1")
                    assert report.stored == len(batch), report
                continue
            held = [e for batch in batches for e in batch]
            if i == 7:
                bare = [e.without_payload() if e in ra else e for e in held]
                await _import(node, writers[0], root / f"{name}{i}-bare.bundle", bare)
                held = ra
            await _import(node, writers[0], root / f"{name}{i}.bundle", held)
    wall.now = NOW
    for name, node in mesh.nodes.items():
        for who, (workspace, scopes) in ROLES.items():
            issued = await node.create_token(who, workspace, scopes)
            mesh.callers[name, who] = await node.authenticate(issued.token)
    return mesh


async def _import(node: Node, exporter: ForeignWriter, path: Path, entries: list[Any]) -> None:
    """Import ``entries`` as a bundle that ``exporter``, a member, cut."""
    header = BundleHeader(exporter.mesh, exporter.key.public, BASE, Frontier())
    writer = BundleWriter(exporter.key, header)
    data = b"".join([writer.start(), *map(writer.entry, entries), writer.finish()])
    await asyncio.to_thread(path.write_bytes, data)
    report = await node.import_bundle(path)
    assert report.rejected == report.pending == 0, report


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    loop = asyncio.new_event_loop()
    stack = AsyncExitStack()
    try:
        built = loop.run_until_complete(_build(tmp_path_factory.mktemp("mesh"), stack))
        yield built
    finally:
        loop.run_until_complete(stack.aclose())
        loop.close()


# -- what callers ask ------------------------------------------------------------------------------

_DAYS = [format_instant(BASE + d * DAY)[:10] for d in range(-12, 9)]
_moments = st.one_of(
    st.sampled_from(_DAYS),
    st.integers(BASE - 12 * DAY, BASE + 8 * DAY).map(format_instant),
    st.integers(BASE - 12 * DAY, BASE + 8 * DAY).map(lambda ms: format_instant(ms, 120)),
)
_terms = st.sampled_from(WORDS + FILLER + ("tag", "nothing", "Alpha", "ÁLPHA"))
_query = st.lists(_terms, min_size=1, max_size=4).map(" ".join)
_match = st.one_of(
    st.lists(st.one_of(_terms, st.sampled_from(TAGS)), min_size=1, max_size=4),
    st.sampled_from(TAGS + WORDS),
)
_anchor = st.one_of(
    st.sampled_from(CORPUS_IDS),
    st.sampled_from(CORPUS_IDS),
    st.sampled_from(CORPUS_IDS),
    st.sampled_from(OTHER_IDS + MALLORY_IDS),
    st.sampled_from(UNKNOWN_IDS),
)
_ORDERS = ("ingest_time_desc", "ingest_time_asc", "content_time_desc", "content_time_asc")
_order = st.sampled_from(_ORDERS)
_VALID: dict[str, st.SearchStrategy[Any]] = {
    "order_by": _order,
    "page": st.integers(1, 4),
    "page_size": st.integers(1, 30),
    "is_conversational_only": st.booleans(),
    "shed_idf_noise": st.booleans(),
    "agent_profile": st.sampled_from(["desk", "recent"]),
    "start_date": _moments,
    "end_date": _moments,
}
_INVALID: list[tuple[str, Any]] = [
    ("action", "search"),
    ("action", None),
    ("action", "changes"),
    ("since", "2026-09-22"),
    ("as_of", "2026-09-22"),
    ("color", "red"),
    ("order_by", "newest"),
    ("page", 0),
    ("page", 10_001),
    ("page", "2"),
    ("page", True),
    ("page_size", 0),
    ("page_size", 101),
    ("page_size", 2.5),
    ("is_conversational_only", "yes"),
    ("shed_idf_noise", 1),
    ("agent_profile", "nobody"),
    ("start_date", "yesterday"),
    ("end_date", "2026-13-01"),
    ("start_date", "2026-09-21T25:00:00Z"),
    ("end_date", ""),
    ("start_date", 20260921),
    ("query", ""),
    ("query", "   "),
    ("query", "!!!"),
    ("query", '"alpha'),
    ("query", "alpha AND beta"),
    ("query", "x" * 1001),
    ("match", []),
    ("match", [""]),
    ("match", ["alpha beta"]),
    ("match", ["x" * 65]),
    ("match", [1]),
    ("match", "!!!"),
    ("sr_id", "not-an-id"),
    ("sr_id", ""),
    ("sr_id", "x" * 65),
    ("sr_id", 7),
    ("sr_id", None),
    ("query", None),
    ("match", None),
]


@st.composite
def timeline_args(draw: st.DrawFn) -> dict[str, Any]:
    """A reading action with valid arguments; one call in five with one bad value besides."""
    action = draw(st.sampled_from(["list", "find", "intersect", "traverse"]))
    args: dict[str, Any] = {"action": action}
    needs = {
        "find": ("query", _query),
        "intersect": ("match", _match),
        "traverse": ("sr_id", _anchor),
    }.get(action)
    if needs:
        args[needs[0]] = draw(needs[1])
    windowed = action != "find"  # find takes no window
    for name, strategy in _VALID.items():
        if (windowed or not name.endswith("_date")) and draw(st.integers(0, 2)) == 0:
            args[name] = draw(strategy)
    if draw(st.sampled_from(range(5))) == 4:  # the last choice is drawn least and shrunk from
        name, value = draw(st.sampled_from(_INVALID))
        args[name] = value
    return args


def _hidden_from(who: str) -> set[str]:
    """The SRs of X that ``who`` may not read."""
    return set(OTHER_IDS) | (set() if who in ("root", "mallory") else set(MALLORY_IDS))


def _show(diffs: list[Any]) -> str:
    rich, poor, who, a, b = diffs[0]
    return f"{who}: {rich} answered {a!r}\n\n{poor} answered {b!r}"


# -- e_timeline ------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None, derandomize=True)
@given(args=timeline_args())
def test_e_timeline_answers_alike_with_and_without_hidden_rows(
    mesh: Mesh, args: dict[str, Any]
) -> None:
    diffs = mesh.run(mesh.differences("e_timeline", args))
    assert not diffs, _show(diffs)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    since=_moments,
    as_of=st.none() | _moments,
    page=st.integers(1, 3),
    page_size=st.none() | st.integers(1, 30),
)
def test_changes_answers_alike_with_and_without_hidden_rows(
    mesh: Mesh, since: str, as_of: str | None, page: int, page_size: int | None
) -> None:
    """The same property for changes: hidden SRs changed in the window are not there."""
    args = {
        "action": "changes",
        "since": since,
        "as_of": as_of,
        "page": page,
        "page_size": page_size,
    }
    diffs = mesh.run(mesh.differences("e_timeline", args))
    assert not diffs, _show(diffs)


_BASE_CALLS = [
    {"action": "list"},
    {"action": "find", "query": "alpha rare"},
    {"action": "intersect", "match": ["alpha"]},
    {"action": "traverse", "sr_id": CORPUS_IDS[7]},
    {"action": "traverse", "sr_id": MALLORY_IDS[7]},
]


@pytest.mark.parametrize("bad", _INVALID, ids=lambda b: f"{b[0]}={b[1]!r}"[:40])
def test_every_refusal_reads_alike(mesh: Mesh, bad: tuple[str, Any]) -> None:
    """Each bad value, on each action: the same refusal (or answer) with or without hidden rows."""
    for base in _BASE_CALLS:
        diffs = mesh.run(mesh.differences("e_timeline", base | {bad[0]: bad[1]}))
        assert not diffs, _show(diffs)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    hidden=st.sampled_from(OTHER_IDS + MALLORY_IDS),
    unknown=st.sampled_from(UNKNOWN_IDS),
    extra=st.fixed_dictionaries(
        {}, optional={k: _VALID[k] for k in ("order_by", "page", "start_date")}
    ),
)
def test_a_hidden_anchor_answers_like_an_unknown_one(
    mesh: Mesh, hidden: str, unknown: str, extra: dict[str, Any]
) -> None:
    async def check() -> None:
        for who in ("alice", "bob", "root", "mallory"):
            if hidden not in _hidden_from(who):
                continue
            a = await mesh.outcome(
                "X", who, "e_timeline", {"action": "traverse", "sr_id": hidden} | extra
            )
            b = await mesh.outcome(
                "X", who, "e_timeline", {"action": "traverse", "sr_id": unknown} | extra
            )
            assert a == tuple(v.replace(unknown, hidden) if isinstance(v, str) else v for v in b), (
                who
            )

    mesh.run(check())


def _all_pages(mesh: Mesh, node: str, who: str, args: dict[str, Any]) -> list[Outcome]:
    async def pages() -> list[Outcome]:
        out = []
        for page in range(1, 40):
            answer = await mesh.outcome(node, who, "e_timeline", args | {"page": page})
            out.append(answer)
            if answer[0] != "answer" or not answer[1]["has_more"]:
                break
        return out

    result: list[Outcome] = mesh.run(pages())
    return result


BM25_QUERIES = ("alpha rare", "common rare theta", "alpha beta gamma", "rare", "common alpha")


@pytest.mark.parametrize("query", BM25_QUERIES)
@pytest.mark.parametrize("order_by", ["ingest_time_desc", "content_time_asc"])
def test_find_ranks_with_the_statistics_of_what_the_caller_reads(
    mesh: Mesh, query: str, order_by: str
) -> None:
    """Queries matching more SRs than a page holds: which ones each page holds depends on BM25
    scores, so on document counts, lengths and frequencies — none of which may count hidden rows.
    Every page, with and without shedding."""
    for shed in (False, True):
        args = {
            "action": "find",
            "query": query,
            "order_by": order_by,
            "page_size": 30,
            "shed_idf_noise": shed,
        }
        for rich, poor, callers in PAIRS:
            for who in callers:
                assert _all_pages(mesh, rich, who, args) == _all_pages(mesh, poor, who, args)


def test_the_bm25_cases_really_cut_the_ranking(mesh: Mesh) -> None:
    """The BM25 cases above are not vacuous: relevance cuts the matches into several pages
    (page 1 holds the 30 best), and the rare term is much more frequent on X than in what bob
    reads."""
    pages = _all_pages(
        mesh,
        "Y",
        "bob",
        {"action": "find", "query": "alpha rare", "shed_idf_noise": False, "page_size": 30},
    )
    assert len(pages) > 2
    first = [r["rank"] for r in pages[0][1]["results"]]
    assert sorted(first) == list(range(1, 31))

    async def counts() -> tuple[int, int]:
        reader = mesh.nodes["X"].reader()
        shown = await reader.fetchall("SELECT title, text, tags_text FROM srs WHERE live = 1")
        every = sum(" ".join(row).split().count(RARE) for row in shown)  # its occurrences
        docs = await reader.scalar("SELECT count(*) FROM srs WHERE live = 1 AND deleted = 0")
        return int(every), int(docs)

    every, docs = mesh.run(counts())
    assert every > 2000
    assert docs > CORPUS_N + OTHER_N


@settings(max_examples=20, deadline=None, derandomize=True)
@given(items=st.lists(st.sampled_from((*WORDS, *TAGS)), min_size=2, max_size=5, unique=True))
def test_shed_terms_count_only_readable_rows(mesh: Mesh, items: list[str]) -> None:
    for args in (
        {"action": "intersect", "match": items},
        {"action": "find", "query": " ".join(items)},
    ):
        diffs = mesh.run(mesh.differences("e_timeline", args))
        assert not diffs, _show(diffs)


# -- e_audit ---------------------------------------------------------------------------------------


def _feed(mesh: Mesh, node: str, who: str, limit: int) -> Outcome:
    """The whole feed from 0, page by page: ("answer", events) or the refusal."""

    async def walk() -> Outcome:
        events: list[dict[str, Any]] = []
        since = 0
        while True:
            answer = await mesh.outcome(
                node, who, "e_audit", {"action": "list", "since_seq": since, "limit": limit}
            )
            if answer[0] != "answer":
                return answer
            page = answer[1]
            assert page["covered_seq"] >= since
            events += page["events"]
            if page["covered_seq"] == since or not page["events"]:
                return ("answer", events)
            since = page["covered_seq"]

    result: Outcome = mesh.run(walk())
    return result


def _whole_feed(mesh: Mesh, node: str, who: str) -> list[dict[str, Any]]:
    """The feed in pages of 1000, once per node and caller (the nodes do not change)."""
    if (node, who) not in mesh.feeds:
        answer = _feed(mesh, node, who, 1000)
        assert answer[0] == "answer", answer
        mesh.feeds[node, who] = answer[1]
    return mesh.feeds[node, who]


def _without_seq(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k != "seq"} for e in events]


@settings(max_examples=8, deadline=None, derandomize=True)
@given(limit=st.sampled_from([3, 7, 50]) | st.integers(5, 400))
def test_e_audit_lists_the_same_events_without_seq(mesh: Mesh, limit: int) -> None:
    for rich, poor, callers in PAIRS:
        for who in callers:
            a, b = _feed(mesh, rich, who, limit), _feed(mesh, poor, who, limit)
            assert a[0] == b[0], (who, a, b)
            if a[0] == "answer":
                assert _without_seq(a[1]) == _without_seq(b[1]), (rich, poor, who)
                assert a[1] == _whole_feed(mesh, rich, who)  # paging loses nothing
            else:
                assert a == b


@settings(max_examples=25, deadline=None, derandomize=True)
@given(position=st.integers(0, 10_000), limit=st.integers(1, 60), raw=st.integers(0, 2_000))
def test_e_audit_from_the_same_event_continues_alike(
    mesh: Mesh, position: int, limit: int, raw: int
) -> None:
    """A since_seq taken from one event on both nodes gives the same following events; and a
    since_seq anywhere answers the events after it, whatever hidden events lie around it."""

    async def after(node: str, who: str, since: int) -> dict[str, Any]:
        out = await mesh.outcome(node, who, "e_audit", {"since_seq": since, "limit": limit})
        assert out[0] == "answer", out
        answer: dict[str, Any] = out[1]
        return answer

    for rich, poor, callers in PAIRS:
        for who in callers:
            if who == "carol":
                continue
            full = {n: _whole_feed(mesh, n, who) for n in (rich, poor)}
            i = position % len(full[rich])
            pages = {n: mesh.run(after(n, who, full[n][i]["seq"])) for n in (rich, poor)}
            assert _without_seq(pages[rich]["events"]) == _without_seq(pages[poor]["events"])
            assert pages[rich]["feed_id"] == pages[poor]["feed_id"]
            answer = mesh.run(after(rich, who, raw))
            assert answer["events"] == [e for e in full[rich] if e["seq"] > raw][:limit]


@pytest.mark.parametrize(
    "args",
    [
        {"action": "list", "since_seq": -1},
        {"action": "list", "limit": 0},
        {"action": "list", "limit": 1001},
        {"action": "list", "since_seq": "3"},
        {"action": "tail"},
        {"action": "list", "color": "red"},
    ],
)
def test_e_audit_refuses_alike(mesh: Mesh, args: dict[str, Any]) -> None:
    diffs = mesh.run(mesh.differences("e_audit", args))
    assert not diffs, _show(diffs)
    assert mesh.run(mesh.outcome("X", "bob", "e_audit", args))[0] == "refused"


# -- the harness catches leaks ---------------------------------------------------------------------

_LIST = {"action": "list", "page_size": 100, "order_by": "ingest_time_asc"}


def test_a_reader_of_the_hidden_rows_tells_the_nodes_apart(mesh: Mesh) -> None:
    """eve reads workspace other and root reads mallory's private SRs: to them X, Y and Z are
    different nodes, and the same comparisons say so."""
    assert mesh.run(mesh.differences("e_timeline", _LIST, [("X", "Y", ("eve",))]))
    assert mesh.run(mesh.differences("e_timeline", _LIST, [("X", "Y", ("root", "mallory"))]))
    anchor = {"action": "traverse", "sr_id": MALLORY_IDS[0]}
    assert mesh.run(mesh.differences("e_timeline", anchor, [("X", "Y", ("root",))]))
    eve = _feed(mesh, "X", "eve", 100), _feed(mesh, "Y", "eve", 100)
    assert _without_seq(eve[0][1]) != _without_seq(eve[1][1])
    root = _feed(mesh, "X", "root", 100), _feed(mesh, "Y", "root", 100)
    assert _without_seq(root[0][1]) != _without_seq(root[1][1])


def test_the_bundle_imports_compared_are_there_and_a_leak_in_them_shows(
    mesh: Mesh, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bob's feed holds the imports that brought him corpus entries (not the one that brought
    him only headers), and counting what an import brought without the read rule is told
    apart by the same comparison."""
    shown = [e for e in _whole_feed(mesh, "X", "bob") if e["event"] == "bundle_imported"]
    assert [e["detail"]["entries"] > 0 for e in shown] == [True, True]
    assert len([e for e in _whole_feed(mesh, "X", "root") if e["event"] == "bundle_imported"]) == 3

    async def everything(reader: Any, _caller: Caller, row: Any) -> dict[str, int] | None:
        brought = await reader.select_bundle_subjects(row.detail["subjects"])
        return {"entries": sum(brought.values()), "srs": 0, "episodes": 0} if brought else None

    monkeypatch.setattr(audit_tool, "_brought", everything)
    feed = {"action": "list", "since_seq": 0, "limit": 1000}
    assert mesh.run(mesh.differences("e_audit", feed, [("X", "Y", ("bob",))]))


# -- memlane export --------------------------------------------------------------------------------


def _export(mesh: Mesh, node: str, who: str, fmt: str, out: Path) -> Outcome:
    """What ``memlane export`` writes for ``who`` on ``node``: the file's bytes, each note's
    name and bytes, or the refusal."""

    async def run() -> Outcome:
        try:
            await mesh.nodes[node].export(mesh.callers[node, who], out, fmt)
        except NodeError as exc:
            return ("refused", type(exc).__name__, str(exc))
        return ("answer", _written(out))

    return mesh.run(run())


def _written(out: Path) -> bytes | list[tuple[str, bytes]]:
    if out.is_file():
        return out.read_bytes()
    return [(p.name, p.read_bytes()) for p in sorted(out.iterdir())]


def test_an_export_holds_alike_with_and_without_hidden_rows(mesh: Mesh, tmp_path: Path) -> None:
    for rich, poor, callers in PAIRS:
        for who in callers:
            for fmt in ("jsonl", "markdown"):
                a = _export(mesh, rich, who, fmt, tmp_path / f"{rich}-{poor}-{who}.{fmt}")
                b = _export(mesh, poor, who, fmt, tmp_path / f"{poor}-{rich}-{who}.{fmt}")
                assert a == b, f"{who} ({fmt}): {rich} and {poor} exported differently"
    alice = _export(mesh, "Y", "alice", "jsonl", tmp_path / "alice.jsonl")
    shown = alice[1].count(b'"type":"sr"')
    assert shown > CORPUS_N // 2
    assert alice[1].endswith(b'"srs":%d,"episodes":0}\n' % shown)
    assert _export(mesh, "Y", "carol", "jsonl", tmp_path / "carol.jsonl")[0] == "refused"
    # the comparison tells the nodes apart for a caller who reads the difference
    root = [_export(mesh, n, "root", "jsonl", tmp_path / f"root-{n}.jsonl") for n in ("X", "Y")]
    assert root[0] != root[1]


# -- the web view ----------------------------------------------------------------------------------

_WEB_PAGES = (
    "/timeline",
    "/timeline?page=2&order_by=content_time_asc",
    "/timeline?start_date=2026-09-20&end_date=2026-09-25",
    "/search?query=alpha+rare",
    "/search?query=alpha&page=2",
    "/changes?since=2026-09-01&as_of=2026-12-01",
    "/activity?by=day&start_date=2026-09-01&end_date=2026-10-31",
    "/activity?by=hour&start_date=2026-09-20&end_date=2026-09-25",
    "/episodes",
)
_SR_PAGES = 5  # the first, which show SRs whole


def _pages(mesh: Mesh, node: str, who: str) -> list[tuple[int, str]]:
    """What ``who`` is shown of each of ``_WEB_PAGES`` by ``node``'s web view."""

    async def look() -> list[tuple[int, str]]:
        workspace, scopes = ROLES[who]
        token = (await mesh.nodes[node].create_token(who, workspace, scopes)).token
        async with served(mesh.nodes[node]) as port:
            return [
                (a.status, a.body)
                for a in [
                    await ask(port, "GET", p, cookie=f"memlane_token={token}") for p in _WEB_PAGES
                ]
            ]

    return mesh.run(look())


def test_the_web_pages_show_alike_with_and_without_hidden_rows(mesh: Mesh) -> None:
    for rich, poor, callers in PAIRS:
        for who in callers:
            assert _pages(mesh, rich, who) == _pages(mesh, poor, who), f"{who}: {rich}, {poor}"
    shown = _pages(mesh, "Y", "alice")
    assert [status for status, _ in shown] == [200] * len(_WEB_PAGES)
    assert all(body.count('class="sr"') > 0 for _, body in shown[:_SR_PAGES])
    assert 'class="change' in shown[_SR_PAGES][1]
    assert '<rect class="bar"' in shown[_SR_PAGES + 1][1]
    assert _pages(mesh, "X", "root") != _pages(mesh, "Y", "root")  # the check can tell
