"""Two sync sessions joined back to back, and a small in-memory driver for each end.

``Replica`` holds logs the way a store would (entries appended in seq order, authenticated with
the one rule); ``Peer`` reacts to session events the way the mesh transport will: digest after
hello, frontier when it is due, the spans the peer lacks streamed within credit, credit given
back as batches arrive, live pushes once caught up.  ``Link`` carries bytes between two peers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from protokit import MESH, seal_one

from protocol.batch import WireEntry
from protocol.entry import Entry, LogId
from protocol.frontier import Frontier, FrontierPart
from protocol.messages import Bye, Credit, Entries, FrontierDigest, Message, Push, encode_message
from protocol.session import NEED_DATA, ConnectionClosed, Event, Session, State
from protocol.signing import SigningKey, authentic_from

__all__ = [
    "LOG_A",
    "LOG_B",
    "Link",
    "Peer",
    "Replica",
    "deliver",
    "frame",
    "key_of",
    "make_log",
    "node_id",
    "pair_in",
    "pump",
]


def node_id(name: str) -> bytes:
    return name.encode().ljust(32, b".")


def key_of(key_byte: int) -> SigningKey:
    return SigningKey(bytes([key_byte]) * 32)


def make_log(key_byte: int, n: int, *, epoch: bytes = b"\x22" * 8) -> list[Entry]:
    """``n`` linked entries of one writer's log."""
    key = key_of(key_byte)
    run: list[Entry] = []
    prev = None
    for seq in range(1, n + 1):
        entry = seal_one(seq, prev, key=key, epoch=epoch)
        run.append(entry)
        prev = entry.id
    return run


def frame(message: Message) -> bytes:
    """A frame built without any session's checks (to play a misbehaving peer)."""
    body = encode_message(message)
    return len(body).to_bytes(4, "big") + body


class Replica:
    """Logs held in memory, appended only in seq order and only when authentic."""

    def __init__(self, *logs: Sequence[Entry]) -> None:
        self.logs: dict[LogId, list[Entry]] = {}
        self.forks: list[tuple[bytes, bytes]] = []
        for run in logs:
            self.logs[run[0].header.log] = list(run)

    def frontier(self) -> Frontier:
        return Frontier.from_heads({log: (len(run), run[-1].id) for log, run in self.logs.items()})

    def wanted_by(self, ours: Frontier, theirs: Frontier) -> list[WireEntry]:
        out: list[WireEntry] = []
        for span in ours.lacking(theirs):
            run = self.logs[span.log]
            first = span.first
            if span.after is not None and run[first - 2].id != span.after:
                first -= 1  # the peer holds another entry there: send ours to show the fork
            out += [(e.raw, e.payload) for e in run[first - 1 : span.last]]
        return out

    def receive(self, items: Sequence[WireEntry]) -> None:
        by_log: dict[LogId, list[Entry]] = {}
        for raw, payload in items:
            entry = Entry.decode(raw, payload)
            by_log.setdefault(entry.header.log, []).append(entry)
        for log, candidates in by_log.items():
            run = self.logs.setdefault(log, [])
            for entry in candidates:
                seq = entry.header.seq
                if seq <= len(run) and run[seq - 1].id != entry.id:
                    self.forks.append((run[seq - 1].raw, entry.raw))
            head = (len(run), run[-1].id if run else None)
            fresh = [e for e in candidates if e.header.seq > head[0]]
            run += authentic_from(head[0], head[1], fresh)


WINDOW = Credit(4, 1 << 20)


class Peer:
    """One node's side of a connection: a session, a replica and the driving rules."""

    def __init__(self, name: str, replica: Replica, *, window: Credit = WINDOW) -> None:
        self.session = Session(mesh=MESH, node=node_id(name), features=("push",))
        self.replica = replica
        self.window = window
        self.queue: list[WireEntry] = []  # what the peer lacks, this round
        self.live: list[WireEntry] = []  # new entries waiting to be pushed
        self.received: list[Message] = []
        self.closed: ConnectionClosed | None = None
        self.stalls = 0  # times a batch waited for credit

    def start(self) -> list[bytes]:
        return [self.session.start(), self.session.send(self.window)]

    def write(self, entries: Sequence[Entry]) -> list[bytes]:
        """Entries authored here after catch-up: kept and pushed."""
        run = self.replica.logs.setdefault(entries[0].header.log, [])
        run += entries
        self.live += [(e.raw, e.payload) for e in entries]
        return self._pump()

    def begin_round(self) -> list[bytes]:
        return [self.session.send(FrontierDigest(self.replica.frontier().digest()))]

    def react(self, event: Event) -> list[bytes]:
        s = self.session
        if isinstance(event, ConnectionClosed):
            self.closed = event
            return []
        assert event is not NEED_DATA
        self.received.append(event)
        out: list[bytes] = []
        match event:
            case FrontierPart(more=False):
                assert s.our_frontier is not None
                self.queue = self.replica.wanted_by(s.our_frontier, event)
            case Entries(entries=items) | Push(entries=items):
                self.replica.receive(items)
                cost = sum(len(h) + len(p or b"") for h, p in items)
                if items:
                    out.append(s.send(Credit(len(items), cost)))
            case Bye() if s.our_state is not State.CLOSED:
                out.append(s.send(Bye()))
            case _:
                pass
        if s.owes_digest:
            out += self.begin_round()
        if s.owes_frontier:
            out += [s.send(part) for part in self.replica.frontier().parts()]
        return out + self._pump()

    def _pump(self) -> list[bytes]:
        s, out = self.session, []
        while s.may_stream:
            n = s.fits(self.queue)
            if n == 0 and self.queue:
                self.stalls += 1
                break
            batch, self.queue = self.queue[:n], self.queue[n:]
            out.append(s.send(Entries(tuple(batch), done=not self.queue)))
        while s.our_state is State.LIVE and self.live and (n := s.fits(self.live)):
            batch, self.live = self.live[:n], self.live[n:]
            out.append(s.send(Push(tuple(batch))))
        return out


class Link:
    """Two peers joined back to back; ``run`` carries bytes both ways until both are quiet."""

    def __init__(self, a: Peer, b: Peer) -> None:
        self.a, self.b = a, b
        self.wire: dict[int, list[bytes]] = {id(a): [], id(b): []}  # bytes on the way to…

    def put(self, sender: Peer, frames: list[bytes]) -> None:
        self.wire[id(self.other(sender))] += frames

    def other(self, peer: Peer) -> Peer:
        return self.b if peer is self.a else self.a

    def run(self, *, max_steps: int = 10_000) -> None:
        for _ in range(max_steps):
            moved = False
            for peer in (self.a, self.b):
                pending, self.wire[id(peer)] = self.wire[id(peer)], []
                for data in pending:
                    moved = True
                    peer.session.receive_data(data)
                    self.put(peer, pump(peer))
            if not moved:
                return
        raise AssertionError("the link did not settle")


def pump(peer: Peer) -> list[bytes]:
    """Every event the peer's session has, each reacted to; the bytes the reactions made."""
    out: list[bytes] = []
    while (event := peer.session.next_event()) is not NEED_DATA:
        out += peer.react(event)
        if isinstance(event, ConnectionClosed):
            break
    return out


# --- two bare sessions, stepped by hand into any state ------------------------------------------


def deliver(data: bytes, to: Session) -> list[Event]:
    """Feed ``data`` to a session and return every event it yields."""
    to.receive_data(data)
    events: list[Event] = []
    while (event := to.next_event()) is not NEED_DATA:
        events.append(event)
        if isinstance(event, ConnectionClosed):
            break
    return events


LOG_A = make_log(1, 2)
LOG_B = make_log(2, 2)


def _script() -> list[tuple[State, list[Message], list[Message]]]:
    fa, fb = Replica(LOG_A[:1]).frontier(), Replica(LOG_B[:1]).frontier()
    grant = Credit(100, 1 << 20)
    return [
        (State.HELLO, [grant], [grant]),  # each hello goes first, from the session itself
        (State.DIGEST, [FrontierDigest(fa.digest())], [FrontierDigest(fb.digest())]),
        (State.FRONTIER, [*fa.parts()], [*fb.parts()]),
        (State.STREAMING, [Entries.of(LOG_A[1:])], [Entries.of(LOG_B[1:])]),
        (State.LIVE, [Entries(done=True)], [Entries(done=True)]),
        (State.CLOSED, [Bye()], [Bye()]),
    ]


def pair_in(state: State, *, features: Iterable[str] = ()) -> tuple[Session, Session]:
    """Sessions ``a`` and ``b`` with both sides in ``state``, reached the ordinary way: ``a``
    holds one log and ``b`` another (so the digests differ), each granted ample credit; both
    offer ``features``."""
    offered = tuple(features)
    a = Session(mesh=MESH, node=node_id("a"), features=offered)
    b = Session(mesh=MESH, node=node_id("b"), features=offered)
    for reached, from_a, from_b in _script():
        if a.our_state is state:
            break
        out_a = [a.start()] if reached is State.HELLO else []
        out_b = [b.start()] if reached is State.HELLO else []
        out_a += [a.send(m) for m in from_a]
        out_b += [b.send(m) for m in from_b]
        deliver(b"".join(out_a), b)
        deliver(b"".join(out_b), a)
        assert a.our_state is b.our_state is a.their_state is reached
    return a, b
