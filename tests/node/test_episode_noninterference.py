"""Episodes a caller cannot read change nothing it sees (docs/authority.md,
docs/tools/work_episode_chain.md), and the episode view is the same whatever order its entries
arrive in.

Non-interference is differential.  Every episode entry is sealed once by other nodes' writers,
so ids and times are the same on each node:

- V: alice's chain in vault ``team``, its amendments, two episodes of hers whose ``prev_id``
  names a hidden one, and the admin's own episodes;
- O: bob's and carol's episodes in ``team`` (one naming alice's), amended and forgotten;
- W: vault ``other`` — alice's and olga's episodes there, and amendments and forgets from there
  naming alice's ``team`` episodes (they count only in their own vault);
- A: alice's own hidden episodes — the oldest two of her chain, one forgotten and one
  expired, and her newest, forgotten with nothing recorded after it.

``rich`` receives V, O, W and A; ``bare`` V only; ``team`` V and O.  alice must get the same
answers from rich and bare, the admin (with and without ``any_caller``) from rich and team:
chains from every start with several ``k``, every page of work_episodes with several sizes and
filters, refusals, and the answers for hidden and unknown starts.  Every entry is written a day
before the questions, so each node answers at the same moment.  The last tests show that the
comparison catches a reader contract missing any one of its conditions.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from node.access.callers import Caller
from node.errors import NodeError
from node.node import Node
from node.views import episode_reads as reads
from node.views.episode_reads import Filters, Scope
from protocol.clock import Hlc
from protocol.entry import Entry
from protocol.signing import SigningKey
from protocol.timefmt import format_instant
from tests.node.episode_helpers import UNKNOWN, about, record, unavailable
from tests.node.helpers import ForeignWriter, Wall, admit

BASE = 1_790_000_000_000
SECOND, MINUTE, HOUR, DAY = 1000, 60_000, 3_600_000, 86_400_000
READ = BASE + DAY  # every node's wall clock: after every entry
TOOLS = ("shell", "search", "edit")
TAGS = ("ops", "q3", "ml")
RW = ("read:workspace", "write:workspace")


def _id(group: int, n: int) -> str:
    return f"0000000{group:x}-0000-7000-8000-{n:012d}"


ALICE = [_id(0xA, i) for i in range(23)]  # 0, 1 and 22 hidden (A); 2..21 visible (V)
BOB, CAROL, ROOT = (
    [_id(0xB, i) for i in range(12)],
    [_id(0xC, i) for i in range(4)],
    [_id(0xD, i) for i in range(3)],
)
ELSEWHERE = [_id(0xE, i) for i in range(6)]  # vault other
TO_BOB, TO_ELSEWHERE = _id(0xF, 1), _id(0xF, 2)  # alice's, naming hidden episodes


def _fields(i: int) -> dict[str, Any]:
    """Fields shared by visible and hidden episodes, so every filter meets both."""
    tags = [TAGS[i % 3]] + (["ops"] if i % 4 == 0 and i % 3 else [])
    return {
        "tool": TOOLS[i % 3],
        "tags": tags,
        "summary": f"episode {i}",
        "status": "failed" if i % 7 == 0 else "recorded",
    }


def _at(i: int, extra: int = 0) -> Hlc:
    return Hlc(BASE + i * MINUTE + extra, 0)


Item = tuple[str, dict[str, Any], Hlc]


def _visible() -> list[Item]:
    out: list[Item] = []
    for i in range(2, 22):
        fields = _fields(i) | ({"expires_at": READ + DAY} if i % 5 == 0 else {})
        out.append(("episode.record", record(ALICE[i], prev=ALICE[i - 1], **fields), _at(i)))
        if i == 10:
            out.append(
                ("episode.record", record(TO_BOB, prev=BOB[3], **_fields(1)), _at(i, 30 * SECOND))
            )
            out.append(
                (
                    "episode.record",
                    record(TO_ELSEWHERE, prev=ELSEWHERE[1], **_fields(2)),
                    _at(i, 40 * SECOND),
                )
            )
    out += [
        ("episode.amend", about(ALICE[5], status="done"), _at(22)),
        ("episode.amend", about(ALICE[5], status="failed"), _at(23)),
        ("episode.amend", about(ALICE[8], trust=0.5, task_result=1), _at(22, 1)),
        ("episode.amend", about(ALICE[9], status="done", verdict_at=BASE), _at(22, 2)),
        ("episode.amend", about(ALICE[12], status="done", eligibility="held"), _at(23, 1)),
        ("episode.amend", about(ALICE[9], caller="root", status="reviewed"), _at(30)),
    ]
    for n, episode in enumerate(ROOT):
        prev = ROOT[n - 1] if n else None
        out.append(
            (
                "episode.record",
                record(episode, caller="root", prev=prev, **_fields(n)),
                _at(3 * n + 4, 10),
            )
        )
    return out


def _others() -> list[Item]:
    """bob's and carol's: at alice's times (ties broken by writer) and between them."""
    out: list[Item] = []
    for i, episode in enumerate(BOB):
        prev = ALICE[12] if i == 0 else BOB[i - 1]  # bob's first names one of alice's
        out.append(
            (
                "episode.record",
                record(episode, caller="bob", prev=prev, **_fields(i)),
                _at(i + 2, 0 if i % 2 else 20 * SECOND),
            )
        )
    for i, episode in enumerate(CAROL):
        out.append(
            ("episode.record", record(episode, caller="carol", **_fields(i + 1)), _at(2 * i + 3))
        )
    out += [
        ("episode.amend", about(BOB[3], caller="bob", status="done"), _at(22, 3)),
        ("episode.forget", about(BOB[5], caller="bob"), _at(22, 4)),
    ]
    return out


def _elsewhere() -> list[Item]:
    out: list[Item] = []
    for i, episode in enumerate(ELSEWHERE):
        caller = "alice" if i % 2 else "olga"
        prev = ELSEWHERE[i - 1] if i else None
        out.append(
            (
                "episode.record",
                record(episode, caller=caller, vault="other", prev=prev, **_fields(i)),
                _at(i + 5),
            )
        )
    out += [  # naming alice's team episodes from another vault: they count nowhere
        ("episode.amend", about(ALICE[5], vault="other", status="hijacked"), _at(25)),
        ("episode.amend", about(ALICE[7], vault="other", trust=0.99, status="done"), _at(25, 1)),
        ("episode.forget", about(ALICE[6], vault="other"), _at(25, 2)),
        ("episode.forget", about(ALICE[21], vault="other"), _at(25, 3)),
    ]
    return out


def _own_hidden() -> list[Item]:
    return [
        ("episode.record", record(ALICE[0], **_fields(0)), _at(0)),
        (
            "episode.record",
            record(ALICE[1], prev=ALICE[0], expires_at=BASE + HOUR, **_fields(1)),
            _at(1),
        ),
        ("episode.amend", about(ALICE[1], status="done"), _at(1, 1)),
        ("episode.forget", about(ALICE[0]), _at(1, 2)),
        ("episode.record", record(ALICE[22], prev=ALICE[21], **_fields(22)), _at(22, 10)),
        ("episode.forget", about(ALICE[22]), _at(22, 20)),
    ]


# The seeds of every writer these tests seal entries with (admitted by ``_copies``).
_SEEDS = (0x51, 0x52, 0x53, 0x54, 0x61, 0x62, 0x63, 0x64)


def _seal(mesh: bytes, seed: int, items: list[Item]) -> list[Entry]:
    assert seed in _SEEDS
    writer = ForeignWriter(mesh, seed=bytes([seed]) * 32)
    return [writer.next(kind, payload, hlc=hlc) for kind, payload, hlc in items]


@pytest_asyncio.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as opened:
        yield opened


async def _copies(tmp_path: Path, stack: AsyncExitStack, wall: Wall, names: Any) -> list[Node]:
    """Nodes that are copies of one initialised node: one mesh, the writers of ``_SEEDS``
    admitted."""
    info = await Node.init(tmp_path / "seed", wall=wall)
    async with Node.open(tmp_path / "seed", wall=wall) as seed:
        await admit(seed, *(ForeignWriter(info.mesh, seed=bytes([s]) * 32) for s in _SEEDS))
    out = []
    for name in names:
        shutil.copytree(tmp_path / "seed", tmp_path / name)
        out.append(await stack.enter_async_context(Node.open(tmp_path / name, wall=wall)))
    return out


async def _deliver(node: Node, logs: list[list[Entry]], rounds: int = 4) -> None:
    """In rounds, as over a mesh; in each round the later logs' entries arrive first."""
    for r in range(rounds):
        for log in reversed(logs):
            size = -(-len(log) // rounds)
            batch = log[r * size : (r + 1) * size]
            if batch:
                report = await node.receive(batch, source="peer")
                assert report.stored == len(batch), report


async def _caller(node: Node, principal: str, scopes: tuple[str, ...]) -> Caller:
    return await node.authenticate((await node.create_token(principal, "team", scopes)).token)


async def _outcome(node: Node, who: Caller, tool: str, args: dict[str, Any]) -> Any:
    try:
        return ("answer", await getattr(node, tool)(who, **args))
    except NodeError as exc:
        return ("refused", type(exc).__name__, str(exc))


# -- what is asked ---------------------------------------------------------------------------------

STARTS = [*ALICE, *BOB, *CAROL, *ROOT, *ELSEWHERE, TO_BOB, TO_ELSEWHERE, UNKNOWN, "nope"]
WINDOWS = [
    (None, format_instant(BASE + 9 * MINUTE)),
    (format_instant(BASE + 6 * MINUTE), format_instant(BASE + 14 * MINUTE + 30 * SECOND)),
    (format_instant(BASE + 10 * MINUTE), None),
    ("2026-09-21", "2026-09-22"),
]
FILTERS: list[dict[str, Any]] = [
    {},
    {"status": "done"},
    {"status": "failed"},
    {"status": "recorded"},
    {"status": "hijacked"},
    {"tool": "shell"},
    {"tool": "edit", "status": "recorded"},
    {"tags": ["ops"]},
    {"tags": ["ops", "q3"]},
    {"tags": ["ml"], "tool": "edit"},
    *[{k: v for k, v in (("since", s), ("until", u)) if v} for s, u in WINDOWS],
    {"since": format_instant(BASE + 6 * MINUTE), "tags": ["ops"], "status": "recorded"},
]
BAD: list[dict[str, Any]] = [
    {"id": UNKNOWN, "k": 0},
    {"id": ALICE[5], "k": "3"},
    {"id": ""},
    {"id": ALICE[5], "x": 1},
    {"id": ALICE[22], "response_format": "short"},
    {"id": ALICE[1], "verbosity": "full", "response_format": "concise"},
]
LIST_BAD: list[dict[str, Any]] = [
    {"page": 0},
    {"page_size": 101},
    {"since": "2026-09-22", "until": "2026-09-21"},
    {"tags": "ops"},
    {"status": ""},
    {"id": ALICE[3]},
]


def _chain_calls(extra: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for start in STARTS:
        for k in (1, 2, 3, 7, None, 200):
            yield {"id": start, "k": k} | extra
        yield {"id": start, "k": 4, "response_format": "concise"} | extra
    yield from BAD


async def _pages(node: Node, who: Caller, args: dict[str, Any]) -> list[Any]:
    """Every page, and the one after the last."""
    out = []
    for page in range(1, 200):
        answer = await _outcome(node, who, "work_episodes", args | {"page": page})
        out.append(answer)
        if answer[0] != "answer" or not answer[1]["has_more"]:
            out.append(await _outcome(node, who, "work_episodes", args | {"page": page + 1}))
            return out
    raise AssertionError("more pages than episodes")


async def _differences(
    rich: Node, poor: Node, principal: str, scopes: tuple[str, ...], extra: dict[str, Any]
) -> list[tuple[str, dict[str, Any], Any, Any]]:
    """Every call whose answers differ between the two nodes."""
    mine, theirs = await _caller(rich, principal, scopes), await _caller(poor, principal, scopes)
    out = []
    for args in _chain_calls(extra):
        a = await _outcome(rich, mine, "work_episode_chain", args)
        b = await _outcome(poor, theirs, "work_episode_chain", args)
        if a != b:
            out.append(("work_episode_chain", args, a, b))
    for filters in FILTERS:
        for size in (1, 3, 7, 20, 100):
            for fmt in ("detailed", "concise") if size == 7 else ("detailed",):
                args = filters | extra | {"page_size": size, "response_format": fmt}
                a, b = await _pages(rich, mine, args), await _pages(poor, theirs, args)
                if a != b:
                    out.append(("work_episodes", args, a, b))
    for args in LIST_BAD:
        a = await _outcome(rich, mine, "work_episodes", args | extra)
        b = await _outcome(poor, theirs, "work_episodes", args | extra)
        if a != b:
            out.append(("work_episodes", args, a, b))
    return out


async def _stores(tmp_path: Path, stack: AsyncExitStack) -> dict[str, Node]:
    rich, bare, team = await _copies(tmp_path, stack, Wall(READ), ("rich", "bare", "team"))
    mesh = rich.info.mesh
    v, o = _seal(mesh, 0x51, _visible()), _seal(mesh, 0x52, _others())
    w, a = _seal(mesh, 0x53, _elsewhere()), _seal(mesh, 0x54, _own_hidden())
    await _deliver(rich, [v, o, w, a])
    await _deliver(bare, [v])
    await _deliver(team, [v, o])
    return {"rich": rich, "bare": bare, "team": team}


# -- the differential ------------------------------------------------------------------------------


def _show(diffs: list[Any]) -> str:
    tool, args, a, b = diffs[0]
    return f"{len(diffs)} differ; first {tool}({args}):\n{a!r}\n\nversus\n{b!r}"


@pytest.mark.asyncio
async def test_alice_reads_alike_with_and_without_episodes_she_cannot_read(tmp_path, stack):
    nodes = await _stores(tmp_path, stack)
    rich, bare = nodes["rich"], nodes["bare"]
    for name, count in (("rich", 50), ("bare", 25), ("team", 41)):
        reader = nodes[name].reader()
        assert await reader.count("episodes") == count
    alice = await _caller(rich, "alice", RW)
    # What she sees is not trivial: her chain stops before its hidden oldest two, and the
    # other vault's amendments and forgets touch nothing of hers.
    answer = await rich.work_episode_chain(alice, id=ALICE[21], k=200)
    assert [e["id"] for e in answer["chain"]] == ALICE[21:1:-1]
    assert answer["chain"][-1]["prev_id"] is None
    by_id = {e["id"]: e for e in answer["chain"]}
    assert (by_id[ALICE[5]]["status"], by_id[ALICE[7]]["trust"]) == ("failed", None)
    assert by_id[ALICE[9]]["status"] == "reviewed"
    for hidden in (ALICE[0], ALICE[1], ALICE[22], BOB[0], ELSEWHERE[1]):
        assert await rich.work_episode_chain(alice, id=hidden) == unavailable(hidden)

    diffs = await _differences(rich, bare, "alice", RW, {})
    assert not diffs, _show(diffs)
    diffs = await _differences(rich, bare, "alice", RW, {"any_caller": True})
    assert not diffs, _show(diffs)  # refused alike, never narrowed


@pytest.mark.asyncio
@pytest.mark.parametrize("any_caller", [True, False])
async def test_an_admin_reads_alike_without_other_vaults_and_forgotten_episodes(
    tmp_path, stack, any_caller
):
    nodes = await _stores(tmp_path, stack)
    admin = ("admin:workspace",)
    diffs = await _differences(
        nodes["rich"], nodes["team"], "root", admin, {"any_caller": any_caller}
    )
    assert not diffs, _show(diffs)
    # To the admin asking for any caller, bob's episodes are there: rich and bare differ.
    root = await _caller(nodes["rich"], "root", admin)
    chain = await nodes["rich"].work_episode_chain(root, id=BOB[0], any_caller=any_caller)
    if any_caller:
        assert [e["id"] for e in chain["chain"]] == [BOB[0], *ALICE[12:1:-1]]
        assert await _differences(nodes["rich"], nodes["bare"], "root", admin, {"any_caller": True})
    else:
        assert chain == unavailable(BOB[0])
        assert [e["id"] for e in (await nodes["rich"].work_episodes(root))["episodes"]] == (
            ROOT[::-1]
        )


# -- the comparison catches leaks ------------------------------------------------------------------

LEAKS = {
    "forgotten": "{e}.blocked = 0",
    "expired": "({e}.expires_at IS NULL OR {e}.expires_at > :moment)",
    "another vault": "{e}.vault = :vault",
    "another caller": "{e}.caller = :principal",
}


@dataclass(frozen=True, slots=True)
class _LeakyScope(Scope):
    """The reader contract without one of its conditions."""

    leak: str = ""

    def passes(self, e: str) -> str:
        sql = Scope.passes(self, e)
        condition = LEAKS[self.leak].format(e=e)
        assert condition in sql
        return sql.replace(condition, "1")


async def _view_answers(node: Node, scope: Scope) -> list[Any]:
    """The chain from every start and the whole list, straight from the view's queries."""
    reader = node.reader()
    out: list[Any] = [await reads.walk(reader, scope, s, k) for s in STARTS for k in (1, 7, 200)]
    return [*out, await reads.page(reader, scope, Filters(), 1, 100)]


@pytest.mark.asyncio
@pytest.mark.parametrize("leak", list(LEAKS))
async def test_a_reader_contract_missing_a_condition_is_caught(tmp_path, stack, leak):
    nodes = await _stores(tmp_path, stack)
    answers = {}
    for name in ("rich", "bare"):
        node = nodes[name]
        alice, moment = await _caller(node, "alice", RW), node.store.now_ms()
        whole, leaky = Scope(alice, False, moment), _LeakyScope(alice, False, moment, leak)
        answers[name] = (await _view_answers(node, whole), await _view_answers(node, leaky))
    assert answers["rich"][0] == answers["bare"][0]  # the whole contract: alike
    assert answers["rich"][1] != answers["bare"][1]  # one condition missing: the stores differ


# -- order independence ----------------------------------------------------------------------------

E = [_id(0x7, i) for i in range(9)]
AHEAD = READ + 10 * MINUTE  # beyond the allowed skew: waits for its time


def _order_logs(mesh: bytes) -> list[list[Entry]]:
    """Records, amendments (the same field twice, from two writers, in either time order),
    forgets, forgets and amendments from another vault, a second record of one id (the first
    by the fold's order is the episode) and an amendment from the future."""
    t = BASE
    w1 = [
        ("episode.record", record(E[1], summary="one"), Hlc(t + 10, 0)),
        ("episode.record", record(E[2], prev=E[1], trust=0.1), Hlc(t + 20, 0)),
        ("episode.record", record(E[3], prev=E[2]), Hlc(t + 30, 0)),
        ("episode.record", record(E[4], caller="bob", tool="shell"), Hlc(t + 40, 0)),
        ("episode.record", record(E[5], prev=E[3], tags=["ops"]), Hlc(t + 50, 0)),
        ("episode.record", record(E[6], prev=E[5], status="planned", summary="w1"), Hlc(t + 60, 0)),
    ]
    w2 = [
        ("episode.amend", about(E[6], status="early"), Hlc(t + 5, 0)),  # before its record
        ("episode.amend", about(E[1], status="done"), Hlc(t + 15, 0)),
        ("episode.amend", about(E[1], status="final", task_result=2), Hlc(t + 35, 0)),
        ("episode.amend", about(E[2], trust=0.3), Hlc(t + 45, 0)),
        ("episode.forget", about(E[3]), Hlc(t + 55, 0)),
    ]
    w3 = [
        ("episode.amend", about(E[2], trust=0.9), Hlc(t + 12, 0)),
        ("episode.amend", about(E[1], status="middle", task_result=1), Hlc(t + 25, 0)),
        ("episode.amend", about(E[4], caller="bob", vault="other", status="x"), Hlc(t + 41, 0)),
        ("episode.forget", about(E[5], vault="other"), Hlc(t + 51, 0)),
        ("episode.amend", about(E[1], status="future"), Hlc(AHEAD, 0)),
    ]
    w4 = [
        ("episode.record", record(E[2], summary="second record"), Hlc(t + 70, 0)),
        ("episode.record", record(E[6], prev=E[5], summary="w4"), Hlc(t + 60, 0)),
        ("episode.record", record(E[7], prev=E[6]), Hlc(t + 80, 0)),
        ("episode.amend", about(E[7], eligibility="held"), Hlc(t + 81, 0)),
        ("episode.forget", about(E[8]), Hlc(t + 90, 0)),  # of an episode never recorded
        ("episode.amend", about(E[1], status="last word"), Hlc(t + 36, 0)),
    ]
    return [_seal(mesh, 0x61 + n, items) for n, items in enumerate((w1, w2, w3, w4))]


SHUFFLES = {"one batch": (1, 99), "one by one": (2, 1), "threes": (3, 3), "twos": (4, 2)}
ORDERS = ("log by log", "logs reversed", "round robin", *SHUFFLES)


def _batches(name: str, logs: list[list[Entry]]) -> list[list[Entry]]:
    """An arrival order as a list of batches.  Out of order within a log, an entry waits."""
    if name == "log by log":
        return logs
    if name == "logs reversed":
        return logs[::-1]
    if name == "round robin":
        return [[log[i]] for i in range(6) for log in logs if i < len(log)]
    seed, size = SHUFFLES[name]
    flat = [e for log in logs for e in log]
    shuffled = random.Random(seed).sample(flat, len(flat))
    return [shuffled[i : i + size] for i in range(0, len(flat), size)]


async def _rows(node: Node, table: str) -> list[tuple[Any, ...]]:
    """A view table's rows without ``pos``, the local arrival position."""
    reader = node.reader()
    columns = [r[1] for r in await reader.fetchall(f"PRAGMA table_info({table})")]
    listed = ", ".join(c for c in columns if c != "pos")
    return [tuple(r) for r in await reader.fetchall(f"SELECT {listed} FROM {table} ORDER BY 1, 2")]


async def _answers(node: Node) -> list[Any]:
    alice, bob = await _caller(node, "alice", RW), await _caller(node, "bob", RW)
    root = await _caller(node, "root", ("admin:workspace",))
    out = []
    for who, extra in ((alice, {}), (bob, {}), (root, {"any_caller": True})):
        for start in E:
            for k in (1, 2, 50):
                out.append(
                    await _outcome(node, who, "work_episode_chain", {"id": start, "k": k} | extra)
                )
        for args in ({}, {"status": "final"}, {"tags": ["ops"]}, {"page_size": 2, "page": 2}):
            out.append(await _outcome(node, who, "work_episodes", args | extra))
    return out


async def _state(node: Node) -> dict[str, Any]:
    reader = node.reader()
    assert await reader.count("pending") == 0
    tables = ("episodes", "episode_entries", "episode_due")
    return {"answers": await _answers(node)} | {t: await _rows(node, t) for t in tables}


@pytest.mark.asyncio
async def test_any_arrival_order_gives_the_same_episodes(tmp_path, stack):
    wall = Wall(READ)
    copies = await _copies(tmp_path, stack, wall, [f"n{i}" for i in range(len(ORDERS))])
    nodes = dict(zip(ORDERS, copies, strict=True))
    logs = _order_logs(copies[0].info.mesh)
    for name, node in nodes.items():
        for batch in _batches(name, logs):
            await node.receive(batch, source="peer")
    states = {name: await _state(node) for name, node in nodes.items()}
    expected = states["log by log"]
    for name, state in states.items():
        assert state == expected, name

    # The state they agree on is the fold's, not an accident of one order.
    node = nodes["one by one"]
    alice = await _caller(node, "alice", RW)
    chain = (await node.work_episode_chain(alice, id=E[7]))["chain"]
    assert [(e["id"], e["prev_id"]) for e in chain] == [(E[7], E[6]), (E[6], E[5]), (E[5], None)]
    # At one time, the writer breaks the tie.
    w1_first = SigningKey(bytes([0x61]) * 32).public < SigningKey(bytes([0x64]) * 32).public
    assert (chain[0]["eligibility"], chain[1]["status"], chain[1]["summary"]) == (
        "held",
        "early",
        "w1" if w1_first else "w4",
    )
    one = (await node.work_episode_chain(alice, id=E[2]))["chain"]
    assert [(e["id"], e.get("summary"), e["trust"]) for e in one] == [
        (E[2], None, 0.3),
        (E[1], "one", None),
    ]
    assert (one[1]["status"], one[1]["task_result"]) == ("last word", 2)
    assert await node.work_episode_chain(alice, id=E[3]) == unavailable(E[3])
    bob = await _caller(node, "bob", RW)
    assert (await node.work_episode_chain(bob, id=E[4]))["chain"][0]["status"] == "recorded"
    assert len(expected["episode_due"]) == 1

    # When the future amendment's time comes, every node applies it.
    wall.now = AHEAD
    later = {name: await _state(node) for name, node in nodes.items()}
    for name, state in later.items():
        assert state == later["log by log"], name
    assert later["log by log"]["episode_due"] == []
    one = (await node.work_episode_chain(alice, id=E[1]))["chain"]
    assert one[0]["status"] == "future"
