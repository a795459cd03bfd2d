"""A deterministic simulation of one mesh: real nodes, a simulated network, one seed.

``simulate(seed)`` builds ``Size.nodes`` real nodes of one mesh (real ``Node`` and ``Store``
over SQLite files, copied from a template made once per process), joins them in a ring
plus random chords (so entries must be relayed; or, ``Size.topology = "sparse"``, a random
tree plus a few random edges), each connection a pair of
``protocol.session.Session`` objects driven here, and runs them over a network simulated from
a ``random.Random(seed)``: a virtual clock, a priority queue of byte chunks in flight, and
faults.  Nothing runs in the background: every step is awaited in the order the queue gives,
and every random choice (including the bytes the nodes draw for keys and ids, taken from a
seeded source while the simulation runs) comes from the seed, so a seed replays exactly.

What the faults mean for a stream protocol — the sessions run over ordered byte streams, so
the faults are what TCP would show a node, not datagrams:

- **delay**: each directed pair of nodes has a latency; every chunk arrives after it (times
  a jitter), never before an earlier chunk of the same connection.  Frames are cut into
  chunks at random places, so a frame often arrives in pieces.  "Slow" faults raise one
  direction's latency twentyfold for a while.
- **loss**: a chunk that never arrives.  Within one connection nothing after it arrives
  either, and the connection is reset a retransmission timeout later (both ends drop their
  sessions); the pair dials again after a back-off with fresh sessions.
- **reordering**: never within a connection.  Across connections it is the ordinary case:
  batches from different peers, and from one peer over an old and a new connection, reach a
  node in whatever order their delays give.
- **duplication**: never of bytes within a connection.  Entries arrive again when a
  connection is cut and a new one re-sends what was not yet acknowledged, when several peers
  relay the same entries, and under the *duplicate connection* fault: the pair's second
  direction dials too, so two connections between the same two nodes carry the same
  entries at once.
- **partition**: a set of directed pairs whose chunks are lost (as loss above).  Symmetric
  partitions split the nodes in two; one-way partitions block only one direction, so a
  connection may keep delivering one way (entries arrive, their credit never comes back)
  until it is reset.  No connection is dialled across a blocked direction.
- **crash**: the node's process dies.  Its store is closed and its sessions dropped: bytes
  in flight to it, bytes its sessions had buffered, batches read but not yet handed to the
  store, rounds, credit and push positions are lost; only what the store committed
  survives.  What it had already sent still arrives at its peers, then the end of stream.
  It restarts (``Node.open`` on the same files) a few virtual seconds later.
- **reset**: a connection is cut at once, both ends dropping their sessions.

Authoring runs throughout on up nodes through the tools (``e_write`` creating and updating,
``e_correct``, ``e_adjust``, ``e_erase``, ``work_record``, ``work_result``, ``work_forget``),
as two principals, with each node's wall moved by the virtual clock (plus a small per-node
skew).  At ``Size.span`` the network heals: partitions lifted,
faults stopped, every node up.  The run goes on until it is quiet (no bytes in flight, every
connection caught up), and then every node must hold the same logs (per-log head, a digest
over every entry id, the same fork proofs) and, with every wall set to one instant, give the
same ``e_timeline`` ``list``, ``find``, ``intersect`` and ``changes`` answers, the same
``work_episodes`` page and the same ``work_episode_chain`` from the caller's newest episode, to
the same caller.

A failing seed's message names it; ``MEMLANE_SIM_SEED=n pytest tests/sim`` runs just that one.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import heapq
import itertools
import json
import os
import random
import shutil
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from node.access.callers import Caller
from node.errors import Refusal
from node.identity import node_id, random_source
from node.mesh.fetch import PAYLOAD_RETRY, Fetch, Filled
from node.mesh.outbox import Outbox, PeerHolds, catch_up, refilled
from node.node import Node
from node.replica import OFFERED, FrontierSnapshot, Replica
from node.store import StoreOptions
from node.store.reader import Marks
from protocol.batch import MAX_BATCH_ENTRIES, WireEntry, entry_cost
from protocol.entry import MAX_HEADER_BYTES, MAX_PAYLOAD_BYTES, decode_header
from protocol.errors import ProtocolError, RemoteProtocolError
from protocol.frames import MAX_FRAME_BYTES
from protocol.messages import (
    Bye,
    Credit,
    Entries,
    Error,
    ForkProof,
    FrontierDigest,
    Hello,
    Message,
    Push,
)
from protocol.payloads import Payloads
from protocol.session import NEED_DATA, ConnectionClosed, Session, State
from protocol.timefmt import format_instant
from tests.node.synckit import make_mesh

__all__ = ["PARTIAL", "SEED_ENV", "Outcome", "Size", "simulate"]

SEED_ENV = "MEMLANE_SIM_SEED"
BASE_WALL = 1_790_000_000_000
OPTIONS = StoreOptions(synchronous="OFF")
PRINCIPALS = ("alice", "bob")
WORKSPACES = ("team", "lab")
ALL = "*"
SCOPES = ("read:workspace", "write:workspace")
WORDS = ("amber", "birch", "cedar", "delta", "ember", "fjord")
WINDOW_BYTES = MAX_HEADER_BYTES + MAX_PAYLOAD_BYTES
_SPEAKING = (State.HELLO, State.DIGEST, State.FRONTIER, State.STREAMING, State.LIVE)
_NETWORK = frozenset({"chunk", "eof", "dial", "reset", "restart"})
_FAULTS = ("partition", "oneway", "crash", "crash mid-batch", "reset", "duplicate", "slow")
SPARSE_DEGREE = 3.5  # the mean degree a sparse topology's random edges fill up to


@dataclass(frozen=True, slots=True)
class Size:
    """How big one seed's run is."""

    nodes: int = 5
    writes: int = 20  # authoring calls spread over the faulty span
    faults: int = 9  # faults spread over the faulty span
    span: float = 25.0  # virtual seconds before the network heals
    settle: float = 600.0  # virtual seconds the healed mesh may take to go quiet
    # Per node, the workspaces whose payloads its grant holds (docs/partial.md); None: every
    # node holds every payload.
    holds: tuple[tuple[str, ...], ...] | None = None
    workspaces: tuple[str, ...] = WORKSPACES  # the workspaces ``holds`` names
    # Who dials whom: "ring", a ring plus random chords; "sparse", a random tree plus random
    # edges up to a mean degree of SPARSE_DEGREE.  Either way, with ``holds``, each
    # workspace's holders in a chain besides.
    topology: str = "ring"
    # With ``holds``: the grants are not applied (every node holds every payload), the
    # callers, writes and edges being those ``holds`` gives — full replication of the same
    # mesh, to set beside the partial run of the same seed.
    full: bool = False

    @property
    def partial(self) -> bool:
        """Whether the grants of ``holds`` are applied."""
        return self.holds is not None and not self.full

    def callers(self, index: int) -> dict[str, str]:
        """The callers a node has tokens for: name -> workspace.  Without ``holds``, each
        principal in "team"; else each principal in each workspace the node's grant holds,
        as ``principal@workspace``."""
        if self.holds is None:
            return dict.fromkeys(PRINCIPALS, "team")
        held = self.holds[index]
        return {
            f"{p}@{w}": w for w in self.workspaces for p in PRINCIPALS if ALL in held or w in held
        }


# A mesh of mixed grants: the first node holds every payload (the full node the others are
# held to), one holds none (a relay), the others one workspace or both.
PARTIAL = Size(nodes=6, holds=(("*",), ("team",), ("lab",), (), ("team",), ("team", "lab")))


@dataclass(slots=True)
class Outcome:
    """What one seed did: the trace digest (equal for equal seeds) and what was counted."""

    seed: int
    trace: str
    stats: Counter[str]
    virtual_seconds: float


class SimFailure(AssertionError):
    """A seed broke a property; the message names the seed."""


# -- deterministic randomness for the node code ---------------------------------------------------


def seeded_bytes(seed: int) -> contextlib.AbstractContextManager[None]:
    """The bytes the node code draws (keys, ids, tokens) come from ``seed`` meanwhile."""
    return random_source(random.Random(f"bytes:{seed}").randbytes)


# -- the template mesh ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Template:
    dirs: tuple[Path, ...]
    tokens: tuple[dict[str, str], ...]


_templates: dict[tuple[Any, ...], Template] = {}


def scratch_dir(prefix: str = "memlane-sim-") -> Path:
    """A new directory in memory when the machine has ``/dev/shm``."""
    shm = Path("/dev/shm")
    where = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix=prefix, dir=where))


async def template(size: Size) -> Template:
    """``size.nodes`` nodes of one mesh, every node key admitted (with its ``holds``), a token
    per caller on each; made once per process (with fixed bytes, so every process makes the
    same mesh)."""
    key = (size.nodes, size.holds, size.workspaces, size.full)
    if key in _templates:
        return _templates[key]
    root = scratch_dir("memlane-sim-template-")
    atexit.register(shutil.rmtree, root, True)
    names = [f"n{i}" for i in range(size.nodes)]
    given = size.holds if size.partial else None
    holds = None if given is None else dict(zip(names[1:], given[1:], strict=True))

    def wall() -> int:
        return BASE_WALL - 60_000

    with seeded_bytes(-size.nodes):
        dirs = await make_mesh(root, names, wall, holds=holds)
        tokens = []
        for i, name in enumerate(names):
            async with Node.open(dirs[name], wall=wall, options=OPTIONS) as node:
                issued = {
                    who: (await node.create_token(who.split("@")[0], ws, SCOPES)).token
                    for who, ws in size.callers(i).items()
                }
            tokens.append(issued)
    made = _templates[key] = Template(tuple(dirs[n] for n in names), tuple(tokens))
    return made


# -- nodes ----------------------------------------------------------------------------------------


class Wall:
    """A node's wall clock: the virtual clock plus the node's skew, or one pinned instant."""

    def __init__(self, sim: Sim, skew_ms: int) -> None:
        self.sim = sim
        self.skew_ms = skew_ms
        self.pinned: int | None = None

    def __call__(self) -> int:
        if self.pinned is not None:
            return self.pinned
        return BASE_WALL + int(self.sim.now * 1000) + self.skew_ms


class SimNode:
    """One node: its directory, and while it is up its ``Node``, replica and callers."""

    def __init__(self, index: int, path: Path, tokens: dict[str, str], wall: Wall) -> None:
        self.index = index
        self.path = path
        self.tokens = tokens
        self.wall = wall
        self.stack: contextlib.AsyncExitStack | None = None
        self._node: Node | None = None
        self._replica: Replica | None = None
        self.callers: dict[str, Caller] = {}
        self.ends: list[End] = []
        self.lives = 0  # times opened
        self._marks: tuple[int, Marks] | None = None
        # Set by a mid-batch crash fault: the process dies at its next batch, "before" the
        # batch is committed or "after" (then before its credit goes back).
        self.doomed: str | None = None

    async def marks(self) -> Marks:
        """The store's marks, read again only when it has committed since (as ``Changes``)."""
        commits = self.node.store.commits
        if self._marks is None or self._marks[0] != commits:
            self._marks = (commits, await self.replica.marks())
        return self._marks[1]

    @property
    def up(self) -> bool:
        return self._node is not None

    @property
    def node(self) -> Node:
        assert self._node is not None, f"node {self.index} is down"
        return self._node

    @property
    def replica(self) -> Replica:
        assert self._replica is not None, f"node {self.index} is down"
        return self._replica

    async def start(self) -> None:
        stack = contextlib.AsyncExitStack()
        node = await stack.enter_async_context(
            Node.open(self.path, wall=self.wall, options=OPTIONS)
        )
        self.stack, self._node = stack, node
        self._replica = node.replica()
        self.callers = {p: await node.authenticate(t) for p, t in self.tokens.items()}
        self.lives += 1

    async def stop(self) -> None:
        """The process dies: the store is closed, every session is dropped."""
        stack, self.stack, self._node, self._replica = self.stack, None, None, None
        self._marks = None
        self.ends = []
        if stack is not None:
            await stack.aclose()


# -- one end of a connection: the session, driven over the node's store ---------------------------


@dataclass(slots=True)
class _Round:
    snapshot: FrontierSnapshot
    outbox: Outbox | None = None
    finished: bool = False


def _payload_bytes(items: Sequence[tuple[bytes, object]]) -> int:
    """The payload bytes among entries or answers (a tag, a code or nothing counts none)."""
    return sum(len(value) for _, value in items if isinstance(value, bytes))


class Ended(Exception):
    """The connection ended (cut, closed, or an error worth a look in ``reason``)."""

    def __init__(self, reason: str, *, problem: bool = False) -> None:
        super().__init__(reason)
        self.problem = problem


class Crashed(Exception):
    """The node's process dies in the middle of taking a batch."""


class End:
    """One node's side of one connection, doing what ``node/mesh/link.py`` does: the digest
    once the peer's hello is in, the frontier when the digests differ, catch-up within
    credit, credit back per committed batch, then live pushes of what the store gained,
    fork proofs, and a new round every ``round_interval`` virtual seconds."""

    def __init__(self, sim: Sim, conn: Conn, side: int, host: SimNode) -> None:
        self.sim, self.conn, self.side, self.host = sim, conn, side, host
        self.session = Session(
            mesh=host.node.info.mesh, node=host.node.key.public, features=OFFERED
        )
        self.source: str | None = None
        self.fetch: Fetch | None = None
        self.round: _Round | None = None
        self.last_round = float("-inf")
        self.holds = PeerHolds()
        self.push: Outbox | None = None
        self.forks_seen = 0
        self.proofs: set[frozenset[bytes]] = set()

    def write(self, message: Message) -> None:
        self.conn.transmit(self.side, self.session.send(message))

    def open(self) -> None:
        s = self.session
        self.conn.transmit(self.side, s.start() + s.send(Credit(self.sim.window, WINDOW_BYTES)))

    async def feed(self, data: bytes) -> None:
        """Bytes from the peer (``b""``: its stream ended); raises ``Ended``."""
        s = self.session
        try:
            s.receive_data(data)
            moved = False
            while (event := s.next_event()) is not NEED_DATA:
                if isinstance(event, ConnectionClosed):
                    raise Ended("the peer's stream ended")
                await self.on_message(event)
                moved = True
                if s.our_state is State.CLOSED and s.their_state is State.CLOSED:
                    raise Ended("both said bye")
            if moved:  # a piece of a frame changes nothing
                await self.step()
        except RemoteProtocolError as exc:
            if exc.field == "eof":
                raise Ended(f"cut inside a frame: {exc}") from exc
            raise Ended(f"the peer broke the protocol: {exc}", problem=True) from exc
        except ProtocolError as exc:
            raise Ended(f"this side broke the protocol: {exc}", problem=True) from exc

    async def on_message(self, message: Message) -> None:
        match message:
            case Hello(node=key):
                self.source = f"peer:{node_id(key)}"
                self.fetch = Fetch(
                    self.host.replica, key, self.session.features, retry=PAYLOAD_RETRY
                )
            case Entries(entries=items) | Push(entries=items):
                await self.take(items)
            case Payloads():
                assert self.fetch is not None
                assert self.source is not None
                if received := self.fetch.received(message):
                    report = await self.host.replica.receive(received, source=self.source)
                    self.sim.stats["payloads fetched"] += len(received)
                    self.filled(report.filled_at)
            case ForkProof(first=first, second=second):
                pair = frozenset((first, second))
                self.proofs.add(pair)
                assert self.source is not None
                await self.host.replica.take_fork_proof(first, second, source=self.source)
            case Error(code=code, text=text):
                raise Ended(f"the peer closed with error {code}: {text}", problem=True)
            case Bye():
                if self.session.our_state in _SPEAKING:
                    self.write(Bye())
            case _:
                pass

    async def take(self, items: tuple[WireEntry, ...]) -> None:
        if not items:
            return
        assert self.source is not None
        for raw, _ in items:
            h = decode_header(raw)
            self.holds.note(h.log, h.seq)
        if self.host.doomed == "before":
            raise Crashed
        report = await self.host.replica.receive(items, source=self.source)
        if self.host.doomed == "after":
            raise Crashed
        self.sim.stats["entries received"] += len(items)
        self.sim.stats["entries stored"] += report.stored
        if report.stored:
            self.sim.poke(self.host)
        self.filled(report.filled_at)
        if self.session.our_state in _SPEAKING:
            self.write(Credit(len(items), sum(map(entry_cost, items))))

    def filled(self, filled: Sequence[Filled]) -> None:
        """Payloads were filled in here: the node's other connections pass them on and ask
        again (as ``LinkHost.filled``)."""
        if not filled:
            return
        for end in self.host.ends:
            if end is not self and end.fetch is not None:
                end.fetch.refill(filled)
        self.sim.poke(self.host)

    async def step(self) -> None:
        s = self.session
        if self.source is None:
            return
        if s.owes_digest:
            await self.send_digest()
        if s.owes_frontier and self.round is not None:
            for part in self.round.snapshot.frontier.parts():
                self.write(part)
        if s.may_stream:
            await self.stream()
        if s.our_state is State.LIVE:
            self.finish_round()
            await self.push_changes()
            await self.gossip_forks()
            if s.caught_up and self.sim.now - self.last_round >= self.sim.round_interval:
                await self.send_digest()
        await self.payloads()

    async def payloads(self) -> None:
        s, fetch = self.session, self.fetch
        assert fetch is not None
        if s.owed is not None and s.our_state in _SPEAKING:
            answer = await fetch.answer(s.owed)
            self.write(answer)
            self.sim.stats["payload bytes sent"] += _payload_bytes(answer.items)
        if s.caught_up and not s.wanting and (want := await fetch.want(self.sim.now)):
            self.sim.stats["wants"] += 1
            self.write(want)

    async def send_digest(self) -> None:
        snapshot = await self.host.replica.snapshot()
        s = self.session
        if not (s.owes_digest or s.caught_up):
            return
        self.round = _Round(snapshot)
        self.last_round = self.sim.now
        self.push = None
        self.sim.stats["rounds"] += 1
        self.write(FrontierDigest(snapshot.frontier.digest()))

    async def stream(self) -> None:
        r = self.round
        assert r is not None
        if r.outbox is None:
            theirs = self.session.their_frontier
            assert theirs is not None
            assert self.fetch is not None
            r.outbox = await catch_up(self.host.replica, r.snapshot, theirs, self.fetch.wire)
        await self.send_out(r.outbox, catch_up=True)

    async def send_out(self, box: Outbox, *, catch_up: bool) -> None:
        s = self.session
        while s.may_stream if catch_up else s.our_state is State.LIVE:
            credit = s.credit
            limit = min(credit.entries, MAX_BATCH_ENTRIES)
            budget = min(credit.nbytes, MAX_FRAME_BYTES)
            items = await box.peek(self.host.replica, entries=limit, nbytes=budget)
            n = s.fits(items)
            if n == 0 and not (catch_up and box.exhausted):
                if not box.exhausted:
                    self.sim.stats["waits for credit"] += 1
                return
            batch = tuple(box.consume(n))
            self.write(Entries(batch, box.exhausted) if catch_up else Push(batch))
            self.sim.stats["entries sent"] += n
            self.sim.stats["payload bytes sent"] += _payload_bytes(batch)
            if catch_up and box.exhausted:
                return

    def finish_round(self) -> None:
        r = self.round
        if r is None or r.finished:
            return
        r.finished = True
        self.holds.round_done(r.snapshot, self.session.their_frontier)
        self.push = None
        assert self.fetch is not None
        self.fetch.again()

    async def push_changes(self) -> None:
        assert self.fetch is not None
        if self.push is None or self.push.exhausted:
            if refills := self.fetch.take_refills():
                self.sim.stats["filled payloads passed on"] += len(refills)
                self.push = refilled(refills, self.fetch.wire)
            elif (await self.host.marks()).pos <= self.holds.cursor:
                return
            else:
                self.push = await self.holds.pushes(self.host.replica, self.fetch.wire)
        await self.send_out(self.push, catch_up=False)

    async def gossip_forks(self) -> None:
        forks = (await self.host.marks()).forks
        if forks == self.forks_seen:
            return
        self.forks_seen = forks
        for first, second in await self.host.replica.fork_proofs():
            pair = frozenset((first, second))
            if pair in self.proofs or self.session.our_state not in _SPEAKING:
                continue
            self.proofs.add(pair)
            self.write(ForkProof(first, second))


# -- the network ----------------------------------------------------------------------------------


class Conn:
    """One connection: ``dialer`` (side 0) and ``listener`` (side 1).  Per direction (by the
    sending side): whether it is dead (a chunk was lost: nothing more arrives) and when its
    last chunk arrives (chunks of one direction arrive in order)."""

    def __init__(self, sim: Sim, number: int, slot: tuple[int, int]) -> None:
        self.sim, self.number, self.slot = sim, number, slot
        self.nodes = (sim.nodes[slot[0]], sim.nodes[slot[1]])
        self.alive = True
        self.dead = [False, False]
        self.gone = [False, False]  # that side's process died
        self.tail = [sim.now, sim.now]
        self.ends = (End(sim, self, 0, self.nodes[0]), End(sim, self, 1, self.nodes[1]))

    def transmit(self, side: int, data: bytes) -> None:
        self.sim.transmit(self, side, data)


class Sim:
    """One seed's run."""

    def __init__(self, seed: int, size: Size, workdir: Path) -> None:
        self.seed, self.size, self.workdir = seed, size, workdir
        self.rng = random.Random(seed)
        self.now = 0.0
        self.queue: list[tuple[float, int, str, Any]] = []
        self.order = itertools.count()
        self.nodes: list[SimNode] = []
        self.conns: dict[tuple[int, int], Conn] = {}
        self.dialing: set[tuple[int, int]] = set()
        self.numbers = itertools.count()
        self.blocked: Counter[tuple[int, int]] = Counter()
        self.duplicated: Counter[tuple[int, int]] = Counter()
        self.slow: Counter[tuple[int, int]] = Counter()
        self.poked: list[SimNode] = []
        self.problems: list[str] = []
        self.stats: Counter[str] = Counter()
        self.trace = hashlib.sha256()
        self.sr_ids: list[str] = []
        # Per caller, its episodes' ids, oldest first.
        self.episodes: dict[str, list[str]] = {
            who: [] for i in range(size.nodes) for who in size.callers(i)
        }
        self.healed = False
        rng = self.rng
        self.loss = rng.choice((0.0, 0.002, 0.01, 0.03))
        self.window = rng.choice((1, 2, 3, 5, 8, 64))
        self.round_interval = rng.uniform(2.0, 20.0)
        n = size.nodes
        self.latency = {(a, b): rng.uniform(0.001, 0.08) for a in range(n) for b in range(n)}
        chained = self.holders_chained()
        drawn = self.sparse(chained) if size.topology == "sparse" else self.ring()
        self.edges: list[tuple[int, int]] = sorted(drawn | chained)

    def ring(self) -> set[tuple[int, int]]:
        """Who dials whom: a ring (so the mesh is connected and entries must be relayed) and
        some chords."""
        rng, n = self.rng, self.size.nodes
        ring = {(min(i, (i + 1) % n), max(i, (i + 1) % n)) for i in range(n)}
        chords = {(a, b) for a in range(n) for b in range(a + 1, n) if rng.random() < 0.25}
        return ring | chords

    def sparse(self, chained: set[tuple[int, int]]) -> set[tuple[int, int]]:
        """Who dials whom in a sparse mesh: a random tree (each node, in a shuffled order,
        joins one that joined before it), then random edges until, with ``chained``, the
        mean degree is ``SPARSE_DEGREE``."""
        rng, n = self.rng, self.size.nodes
        order = rng.sample(range(n), n)
        edges = {_edge(order[k], order[rng.randrange(k)]) for k in range(1, n)}
        while len(edges | chained) < min(n * SPARSE_DEGREE / 2, n * (n - 1) / 2):
            edges.add(_edge(*rng.sample(range(n), 2)))
        return edges

    def holders_chained(self) -> set[tuple[int, int]]:
        """With mixed grants, the nodes holding each workspace in a chain: payloads travel
        only between nodes that hold them (docs/partial.md §Relays)."""
        chained: set[tuple[int, int]] = set()
        for workspace in self.size.workspaces if self.size.holds is not None else ():
            holders = [
                i for i in range(self.size.nodes) if workspace in self.size.callers(i).values()
            ]
            chained |= set(itertools.pairwise(holders))
        return chained

    # -- the queue ------------------------------------------------------------------------------

    def at(self, when: float, kind: str, what: Any = None) -> None:
        heapq.heappush(self.queue, (when, next(self.order), kind, what))

    def note(self, *parts: object) -> None:
        self.trace.update(repr((round(self.now, 6), *parts)).encode())

    def fail(self, what: str) -> SimFailure:
        return SimFailure(
            f"seed {self.seed}: {what} (rerun with {SEED_ENV}={self.seed}; "
            f"loss {self.loss}, window {self.window}, round every {self.round_interval:.1f}s)"
        )

    # -- the run --------------------------------------------------------------------------------

    async def run(self) -> Outcome:
        size, rng = self.size, self.rng
        made = await template(size)
        for i, (src, tokens) in enumerate(zip(made.dirs, made.tokens, strict=True)):
            path = self.workdir / src.name
            shutil.copytree(src, path)
            self.nodes.append(SimNode(i, path, tokens, Wall(self, rng.randint(-1500, 1500))))
        try:
            with seeded_bytes(self.seed):
                for sn in self.nodes:
                    await sn.start()
                for _ in range(size.writes):
                    self.at(rng.uniform(0.0, size.span), "write", rng.randrange(size.nodes))
                for _ in range(size.faults):
                    self.at(rng.uniform(0.0, size.span * 0.9), "fault", rng.choice(_FAULTS))
                self.at(size.span, "heal")
                self.at(self.round_interval / 4, "tick")
                self.dial_all()
                await self.loop()
                await self.verdict()
        finally:
            for sn in self.nodes:
                await sn.stop()
        return Outcome(self.seed, self.trace.hexdigest(), self.stats, self.now)

    async def loop(self) -> None:
        deadline = self.size.span + self.size.settle
        while self.queue:
            when, _, kind, what = heapq.heappop(self.queue)
            if when > deadline:
                raise self.fail(f"the healed mesh did not go quiet within {self.size.settle}s")
            self.now = when
            await self.handle(kind, what)
            await self.settle()
            if self.problems:
                raise self.fail("; ".join(self.problems))
            if self.healed and await self.quiet():
                return

    async def quiet(self) -> bool:
        if any(kind in _NETWORK for _, _, kind, _ in self.queue):
            return False
        for a, b in self.primary_slots():
            conn = self.conns.get((a, b))
            if conn is None or not all(e.session.caught_up for e in conn.ends):
                return False
        return not self.size.partial or not await self.fetchable()

    async def fetchable(self) -> bool:
        """Whether a node lacks a payload it may hold that a peer it dials (or is dialled by)
        holds: it asks again within ``PAYLOAD_RETRY``, so the mesh is not quiet yet."""
        given: dict[int, set[bytes]] = {}  # read only for the peers of a node lacking some
        for i, sn in enumerate(self.nodes):
            lacking = {
                w.id
                for w in await sn.replica.wanted(after=0, limit=1 << 30, places=sn.replica.held())
            }
            if not lacking:
                continue
            for j in sorted({b if a == i else a for a, b in self.edges if i in (a, b)}):
                if j not in given:
                    given[j] = await payload_ids(self.nodes[j].node)
                if lacking & given[j]:
                    return True
        return False

    async def handle(self, kind: str, what: Any) -> None:
        self.note(kind)
        match kind:
            case "chunk":
                conn, side, data = what
                await self.deliver(conn, side, data)
            case "eof":
                conn, side = what
                await self.deliver(conn, side, b"")
            case "reset":
                self.cut(what, "reset")
            case "dial":
                self.dialing.discard(what)
                self.dial(what)
            case "restart":
                sn = self.nodes[what]
                if not sn.up:
                    await sn.start()
                    self.stats["restarts"] += 1
                    self.dial_all()
            case "write":
                sn = self.nodes[what]
                if sn.up and not self.healed:
                    await self.author(sn)
                    self.poke(sn)
            case "fault":
                if not self.healed:
                    await self.fault(what)
            case "lift":
                table, pairs = what
                table.subtract(pairs)
                self.dial_all()
            case "heal":
                await self.heal()
            case "tick":
                for sn in self.nodes:
                    self.poke(sn)
                self.at(self.now + self.round_interval / 4, "tick")

    async def settle(self) -> None:
        """Every node that committed something lets each of its connections push."""
        while self.poked:
            sn = self.poked.pop(0)
            for end in list(sn.ends):
                if end.conn.alive and not end.conn.gone[end.side]:
                    try:
                        await end.step()
                    except Ended as exc:
                        self.ended(end.conn, exc)
                    except ProtocolError as exc:
                        self.ended(end.conn, Ended(f"step: {exc}", problem=True))

    def poke(self, sn: SimNode) -> None:
        if sn.up and sn not in self.poked:
            self.poked.append(sn)

    # -- connections ----------------------------------------------------------------------------

    def primary_slots(self) -> list[tuple[int, int]]:
        return self.edges

    def wanted(self, slot: tuple[int, int]) -> bool:
        a, b = slot
        if not (self.nodes[a].up and self.nodes[b].up):
            return False
        if self.blocked[(a, b)] > 0 or self.blocked[(b, a)] > 0:
            return False
        return (a < b and slot in self.edges) or self.duplicated[(b, a)] > 0

    def dial_all(self) -> None:
        for a, b in self.edges:
            for slot in ((a, b), (b, a)):
                if slot in self.conns or slot in self.dialing:
                    continue
                if self.wanted(slot):
                    self.dialing.add(slot)
                    rtt = self.latency[slot] + self.latency[slot[::-1]]
                    self.at(self.now + self.rng.uniform(0.05, 1.0) + rtt, "dial", slot)

    def dial(self, slot: tuple[int, int]) -> None:
        if slot in self.conns or not self.wanted(slot):
            return
        conn = self.conns[slot] = Conn(self, next(self.numbers), slot)
        self.stats["connections"] += 1
        self.note("open", conn.number, slot)
        for end in conn.ends:
            end.host.ends.append(end)
            end.open()

    def transmit(self, conn: Conn, side: int, data: bytes) -> None:
        if not conn.alive or conn.dead[side] or conn.gone[side]:
            return
        src, dst = conn.slot if side == 0 else conn.slot[::-1]
        rng = self.rng
        cuts = rng.sample(range(1, len(data)), min(len(data) - 1, rng.choice((0, 0, 0, 1, 2))))
        cuts.sort()
        pieces = [data[i:j] for i, j in itertools.pairwise((0, *cuts, len(data)))]
        for piece in pieces:
            lost = rng.random() < self.loss and not self.healed
            if self.blocked[(src, dst)] > 0 or lost:
                conn.dead[side] = True
                self.stats["chunks lost"] += 1
                self.at(self.now + rng.uniform(0.5, 3.0), "reset", conn)
                return
            delay = self.latency[(src, dst)] * (20 if self.slow[(src, dst)] > 0 else 1)
            when = conn.tail[side] = max(conn.tail[side], self.now + delay * rng.uniform(1, 2))
            self.at(when, "chunk", (conn, 1 - side, piece))
            self.stats["chunks"] += 1
            self.stats["bytes"] += len(piece)  # put in flight (it may yet meet a crash)

    async def deliver(self, conn: Conn, side: int, data: bytes) -> None:
        if not conn.alive or conn.gone[side]:
            return
        self.note("deliver", conn.number, side, len(data))
        try:
            await conn.ends[side].feed(data)
        except Ended as exc:
            self.ended(conn, exc)
        except Crashed:
            sn = conn.nodes[side]
            self.stats[f"crashes {sn.doomed} a commit"] += 1
            await self.crash(sn, self.rng.uniform(0.2, 8.0))

    def ended(self, conn: Conn, exc: Ended) -> None:
        if exc.problem:
            self.problems.append(f"connection {conn.slot}: {exc}")
        self.cut(conn, str(exc))

    def cut(self, conn: Conn, why: str) -> None:
        if not conn.alive:
            return
        conn.alive = False
        self.stats["connections cut"] += 1
        self.note("cut", conn.number, why)
        if self.conns.get(conn.slot) is conn:
            del self.conns[conn.slot]
        for end in conn.ends:
            if end in end.host.ends:
                end.host.ends.remove(end)
        self.dial_all()

    # -- authoring ------------------------------------------------------------------------------

    async def author(self, sn: SimNode) -> None:
        if not sn.callers:  # a node that holds no workspace: no caller writes through it
            self.stats["writes on a relay"] += 1
            return
        who = self.rng.choice(sorted(sn.callers))
        try:
            if self.rng.random() < 0.75 or not self.sr_ids:
                done = await self.author_sr(sn, who)
            else:
                done = await self.author_episode(sn, who)
            self.stats["writes"] += 1
            self.stats[f"writes {done}"] += 1
        except Refusal:  # an SR or episode not held here yet, or not this caller's
            self.stats["writes refused"] += 1

    async def author_sr(self, sn: SimNode, who: str) -> str:
        rng, node, caller = self.rng, sn.node, sn.callers[who]
        word, pick, k = rng.choice(WORDS), rng.random(), self.stats["writes"]
        if pick < 0.5 or not self.sr_ids:
            args: dict[str, Any] = {
                "title": f"{word} {k}",
                "text": f"{word} note {k}",
                "tags": [word],
            }
            if rng.random() < 0.2:
                args["visibility"] = "private"
            done = await node.e_write(caller, **args)
            self.sr_ids.append(done["sr_id"])
            return "e_write new"
        sr_id = rng.choice(self.sr_ids)
        if pick < 0.75:
            await node.e_write(caller, sr_id=sr_id, text=f"{word} edit {k}")
            return "e_write update"
        if pick < 0.9:
            await node.e_correct(caller, sr_id=sr_id, reason="fix", text=f"{word} fixed {k}")
            return "e_correct"
        if pick < 0.94:
            await node.e_adjust(caller, sr_id=sr_id, tags=[word, "adjusted"])
            return "e_adjust"
        await node.e_erase(caller, sr_id=sr_id, reason=f"forget {k}")
        return "e_erase"

    async def author_episode(self, sn: SimNode, who: str) -> str:
        rng, node, caller, mine = self.rng, sn.node, sn.callers[who], self.episodes[who]
        word, pick, k = rng.choice(WORDS), rng.random(), self.stats["writes"]
        if pick < 0.6 or not mine:
            done = await node.work_record(caller, summary=f"{word} work {k}", tags=[word])
            mine.append(done["id"])
            return "work_record"
        if pick < 0.9:
            await node.work_result(caller, id=rng.choice(mine), status="done", task_result=0.5)
            return "work_result"
        await node.work_forget(caller, id=rng.choice(mine))
        return "work_forget"

    # -- faults ---------------------------------------------------------------------------------

    async def fault(self, kind: str) -> None:
        rng, n = self.rng, self.size.nodes
        self.stats[f"fault {kind}"] += 1
        lasting = rng.uniform(1.0, self.size.span / 3)
        match kind:
            case "partition" | "oneway":
                side = set(rng.sample(range(n), rng.randint(1, n - 1)))
                pairs = [(a, b) for a in side for b in range(n) if b not in side]
                if kind == "partition":
                    pairs += [(b, a) for a, b in pairs]
                self.blocked.update(pairs)
                self.at(self.now + lasting, "lift", (self.blocked, pairs))
            case "crash":
                up = [sn for sn in self.nodes if sn.up]
                if up:
                    await self.crash(rng.choice(up), rng.uniform(0.2, 8.0))
            case "crash mid-batch":
                rng.choice(self.nodes).doomed = rng.choice(("before", "after"))
            case "reset":
                if self.conns:
                    self.cut(self.conns[rng.choice(sorted(self.conns))], "reset")
            case "duplicate":
                a, b = rng.choice(self.edges)
                self.duplicated[(a, b)] += 1
                self.dial_all()
                self.at(self.now + lasting, "lift", (self.duplicated, [(a, b)]))
            case "slow":
                a, b = rng.sample(range(n), 2)
                self.slow[(a, b)] += 1
                self.at(self.now + lasting, "lift", (self.slow, [(a, b)]))

    async def crash(self, sn: SimNode, down_for: float) -> None:
        self.note("crash", sn.index)
        sn.doomed = None
        for conn in list(self.conns.values()):
            if sn.index not in conn.slot or not conn.alive:
                continue
            side = conn.slot.index(sn.index)
            conn.gone[side] = True
            if not (conn.dead[side] or conn.gone[1 - side]):
                # What it sent still arrives, then the end of stream.
                other = 1 - side
                src, dst = conn.slot if side == 0 else conn.slot[::-1]
                when = max(conn.tail[side], self.now + self.latency[(src, dst)])
                self.at(when, "eof", (conn, other))
            else:
                self.cut(conn, "crash")
        if sn in self.poked:
            self.poked.remove(sn)
        await sn.stop()
        self.stats["crashes"] += 1
        self.at(self.now + down_for, "restart", sn.index)

    async def heal(self) -> None:
        self.healed = True
        self.note("heal")
        self.blocked.clear()
        self.duplicated.clear()
        self.slow.clear()
        for sn in self.nodes:
            sn.doomed = None
            if not sn.up:
                await sn.start()
        self.dial_all()

    # -- the verdict ----------------------------------------------------------------------------

    async def verdict(self) -> None:
        if self.size.partial:
            await self.partial_verdict()
            return
        held = [await holdings(sn.node) for sn in self.nodes]
        for i, h in enumerate(held[1:], 1):
            if h != held[0]:
                raise self.fail(f"node {i} holds other logs than node 0: {diff(held[0], h)}")
        for h in held:
            self.count_payloads(h)
        await self.same_answers()
        self.stats["entries held"] = len(held[0]["ids"])
        self.note("verdict", held[0]["digest"])

    async def same_answers(self) -> None:
        """With every wall set to one instant, each node answers each of its callers as node
        0 answers that caller."""
        instant = max(sn.wall() for sn in self.nodes) + 1000
        for sn in self.nodes:
            sn.wall.pinned = instant
        answers = [await self.answers(sn) for sn in self.nodes]
        for i, a in enumerate(answers[1:], 1):
            for key, value in a.items():
                if value != answers[0][key]:
                    raise self.fail(
                        f"node {i} answers {key} otherwise than node 0:\n"
                        f"{json.dumps(value, sort_keys=True)}\n"
                        f"{json.dumps(answers[0][key], sort_keys=True)}"
                    )

    async def partial_verdict(self) -> None:
        """With mixed grants: every node holds the same headers as node 0 (which holds every
        payload), exactly the payloads node 0 holds whose place its grant holds, and answers
        each of its callers as node 0 answers that caller."""
        full, places = await holdings(self.nodes[0].node), await entry_places(self.nodes[0].node)
        self.count_payloads(full)
        for i, sn in enumerate(self.nodes[1:], 1):
            held = await holdings(sn.node)
            self.count_payloads(held)
            if _headers(held) != _headers(full):
                raise self.fail(f"node {i} holds other headers than node 0: {diff(full, held)}")
            may = sn.replica.held()
            expected = {
                e[:-1]
                for e in full["ids"]
                if e.endswith(b"+")
                and (may is None or places[e[:-1]] is None or places[e[:-1]] in may)
            }
            got = {e[:-1] for e in held["ids"] if e.endswith(b"+")}
            self.stats["payloads withheld"] += len(full["ids"]) - len(got)
            if got != expected:
                raise self.fail(
                    f"node {i} holds {len(got - expected)} payloads outside its "
                    f"grant and lacks {len(expected - got)} of it"
                )
        await self.same_answers()
        self.stats["entries held"] = len(full["ids"])
        self.note("verdict", full["digest"])

    def count_payloads(self, held: dict[str, Any]) -> None:
        """Add one node's payloads to those held over the mesh."""
        self.stats["payloads held"] += sum(i.endswith(b"+") for i in held["ids"])
        self.stats["payload bytes held"] += held["payload bytes"]

    async def answers(self, sn: SimNode) -> dict[str, Any]:
        out: dict[str, Any] = {}
        since = format_instant(BASE_WALL - 120_000)
        for who, caller in sorted(sn.callers.items()):
            node = sn.node
            out[f"{who} list"] = await node.e_timeline(caller, action="list", page_size=100)
            out[f"{who} find"] = await node.e_timeline(
                caller, action="find", query=WORDS[0], page_size=100
            )
            out[f"{who} intersect"] = await node.e_timeline(
                caller, action="intersect", match=["note"], page_size=100
            )
            out[f"{who} intersect page"] = await node.e_timeline(
                caller, action="intersect", match=["note"], page=2, page_size=2
            )
            out[f"{who} changes"] = await node.e_timeline(
                caller, action="changes", since=since, page_size=100
            )
            out[f"{who} episodes"] = await node.work_episodes(caller, page_size=100)
            if self.episodes[who]:
                out[f"{who} chain"] = await node.work_episode_chain(
                    caller, id=self.episodes[who][-1], k=50
                )
        return out


def _edge(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a < b else (b, a)


async def holdings(node: Node) -> dict[str, Any]:
    """What a node holds: each log's head, a digest over every entry id and whether its
    payload is held (erasures take some), the fork proofs."""
    heads: dict[str, tuple[int, str]] = {}
    ids = []
    nbytes = 0
    for entry in await node.entries():
        h = entry.header
        heads[f"{h.writer.hex()[:12]}/{h.epoch.hex()}"] = (h.seq, entry.id.hex())
        ids.append(entry.id + (b"+" if entry.payload is not None else b"-"))
        nbytes += len(entry.payload or b"")
    forks = await node.replica().fork_proofs()
    digest = hashlib.sha256(b"".join(sorted(ids))).hexdigest()
    return {
        "heads": heads,
        "ids": sorted(ids),
        "digest": digest,
        "forks": sorted(forks),
        "payload bytes": nbytes,
    }


async def payload_ids(node: Node) -> set[bytes]:
    """The ids of the entries whose payload the node holds."""
    return {e.id for e in await node.entries() if e.payload is not None}


async def entry_places(node: Node) -> dict[bytes, str | None]:
    """Each entry's place as the node recorded it (docs/partial.md)."""
    rows = await node.reader().fetchall("SELECT id, workspace FROM headers")
    return {bytes(r[0]): r[1] for r in rows}


def _headers(held: dict[str, Any]) -> tuple[Any, ...]:
    return held["heads"], sorted(i[:-1] for i in held["ids"]), held["forks"]


def diff(a: dict[str, Any], b: dict[str, Any]) -> str:
    heads = {k: (a["heads"].get(k), b["heads"].get(k)) for k in a["heads"].keys() | b["heads"]}
    differ = {k: v for k, v in heads.items() if v[0] != v[1]}
    return f"heads that differ {differ}; forks {len(a['forks'])} and {len(b['forks'])}"


async def simulate(seed: int, size: Size = Size(), workdir: Path | None = None) -> Outcome:
    """Run one seed; ``SimFailure`` names it if a property breaks."""
    where = scratch_dir() if workdir is None else Path(tempfile.mkdtemp(dir=workdir))
    try:
        return await Sim(seed, size, where).run()
    finally:
        shutil.rmtree(where, ignore_errors=True)


def seeds(default: Sequence[int]) -> list[int]:
    """``MEMLANE_SIM_SEED`` (one seed, or a comma-separated list) if set, else ``default``."""
    chosen = os.environ.get(SEED_ENV, "").strip()
    if not chosen:
        return list(default)
    return [int(s) for s in chosen.split(",") if s.strip()]


__all__ += ["SimFailure", "seeds"]
