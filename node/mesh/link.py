"""One sync connection: a thin loop between an asyncio stream pair, a
``protocol.session.Session`` and the store (docs/protocol.md §6).

Two tasks share the session.  The *receive* loop reads at most one chunk at a time, takes
every message the session has before reading more (so it never holds more than one frame and
a chunk), hands entries to the store's receive path one batch per transaction, and grants the
batch's credit back once it is committed — so a peer never has more in flight than the
window.  The *drive* loop does whatever is due: the digest once the peer's hello is in, the
frontier when the digests differ, the catch-up stream within credit, and once this side is
``LIVE`` the live push of what the store gained since the round's snapshot (written here or
received from any peer, which is the relay), fork proofs, and a new round now and then.

Every frame is produced by ``session.send`` and written to the stream in the same step, so
frames leave in the order the session checked them.  A write that does not drain within
``write_timeout`` means the peer stopped reading: the connection is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from node.errors import NodeError
from node.identity import node_id
from node.members.errors import MeshError
from node.mesh.peers import DuplicateLink, Peer, PeerState, PeerTable
from node.mesh.progress import CatchUpLog
from node.refusals import REFUSALS
from node.replica import Changes, FrontierSnapshot, Replica
from node.store import Event, Received
from protocol.entry import MAX_HEADER_BYTES, MAX_PAYLOAD_BYTES, Entry, LogId
from protocol.errors import LocalProtocolError, OverLimits, ProtocolError, RemoteProtocolError
from protocol.frames import MAX_FRAME_BYTES
from protocol.messages import (
    FRONTIER_PARTS,
    MAX_BATCH_ENTRIES,
    MAX_ERROR_TEXT,
    MAX_FRONTIER_LOGS,
    Bye,
    Credit,
    Entries,
    Error,
    ErrorCode,
    ForkProof,
    Frontier,
    FrontierDigest,
    FrontierPart,
    Hello,
    Message,
    Push,
    WireEntry,
    entry_cost,
)
from protocol.session import NEED_DATA, ConnectionClosed, Session, State

__all__ = [
    "Link",
    "LinkError",
    "LinkFailed",
    "LinkHost",
    "LinkOptions",
    "LinkRefused",
    "Outbox",
    "PeerClosedWithError",
    "PeerFlooding",
    "PeerGone",
    "PeerHolds",
    "PeerProtocolError",
    "PeerSilent",
    "PeerStalled",
    "Span",
    "catch_up",
]

_SPEAKING = (State.HELLO, State.DIGEST, State.FRONTIER, State.STREAMING, State.LIVE)
_LARGEST_ENTRY = MAX_HEADER_BYTES + MAX_PAYLOAD_BYTES


# -- errors ------------------------------------------------------------------------------------


class LinkError(MeshError):
    """A sync connection ended abnormally; ``code`` is what the peer is told, if anything."""

    code: ErrorCode | None = None


class PeerProtocolError(LinkError):
    """The peer broke the protocol (a bad frame, a message out of turn, beyond credit)."""


class LinkRefused(LinkError):
    """This node will not sync with the peer: not the certificate's key, not admitted,
    itself, or already connected."""

    code = ErrorCode.REFUSED


class PeerFlooding(LinkError):
    """The peer sent more of something than one connection may carry."""

    code = ErrorCode.REFUSED


class PeerSilent(LinkError):
    """No hello from the peer in time."""


class PeerStalled(LinkError):
    """The peer stopped reading: a write did not drain in time."""


class PeerGone(LinkError):
    """The connection was cut (reset, or ended without bye)."""


class PeerClosedWithError(LinkError):
    """The peer closed with an error message."""


class LinkFailed(LinkError):
    """This node failed on its side (its store, or a bug)."""

    code = ErrorCode.INTERNAL


# -- configuration -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LinkOptions:
    """Per-connection limits and timers (seconds); tests shorten them."""

    window_entries: int = 1024  # credit granted: entries in flight towards this node
    window_bytes: int = 8 << 20  # … and bytes (at least one largest entry, §7)
    # Entries sent in one batch: half the window, so the peer's window holds two — the next
    # batch travels while the peer stores one, and a cut loses no more than the window.
    batch_entries: int = 512
    read_chunk: int = 64 << 10
    hello_timeout: float = 10.0
    write_timeout: float = 30.0
    close_timeout: float = 5.0
    round_interval: float = 300.0  # start a new round this long after the last one began
    min_round_interval: float = 1.0  # answer a peer's new round no sooner than this
    max_fork_proofs: int = 256  # fork proofs one connection may bring
    # Tips in one frontier message: the protocol's most; tests send fewer to see parts travel.
    frontier_part: int = MAX_FRONTIER_LOGS

    def __post_init__(self) -> None:
        if not 0 < self.frontier_part <= MAX_FRONTIER_LOGS:
            raise ValueError(f"frontier_part must be in [1, {MAX_FRONTIER_LOGS}]")
        if not 0 < self.window_entries <= MAX_BATCH_ENTRIES * 64:
            raise ValueError("window_entries must be positive")
        if not 0 < self.batch_entries <= MAX_BATCH_ENTRIES:
            raise ValueError(f"batch_entries must be in [1, {MAX_BATCH_ENTRIES}]")
        if self.window_bytes < _LARGEST_ENTRY:
            raise ValueError(f"window_bytes must be at least {_LARGEST_ENTRY} (one entry)")


@dataclass(slots=True)
class LinkHost:
    """What every link of a node shares: the store, its change signal, the peer table."""

    replica: Replica
    changes: Changes
    table: PeerTable
    options: LinkOptions
    # Whether a node key may sync with this node (membership); None lets every key in.
    admits: Callable[[bytes], bool] | None = None


# -- what goes out -----------------------------------------------------------------------------


@dataclass(slots=True)
class Span:
    log_id: int
    next: int
    last: int


class Outbox:
    """Spans of logs to send, read from the store a budget at a time: it holds no more than
    the credit the peer has granted (plus what a batch could not take)."""

    def __init__(self, spans: Sequence[Span]) -> None:
        self._spans = deque(spans)
        self._buffer: list[WireEntry] = []
        self._cost = 0

    @property
    def exhausted(self) -> bool:
        return not self._spans and not self._buffer

    @property
    def size(self) -> int:
        return sum(s.last - s.next + 1 for s in self._spans) + len(self._buffer)

    async def peek(self, replica: Replica, *, entries: int, nbytes: int) -> list[WireEntry]:
        """The next entries, as many as ``entries`` and ``nbytes`` allow."""
        while self._spans and len(self._buffer) < entries and self._cost < nbytes:
            span = self._spans[0]
            rows = await replica.span(span.log_id, gt=span.next - 1, lte=span.last,
                                      limit=entries - len(self._buffer),
                                      max_bytes=nbytes - self._cost)  # fmt: skip
            if not rows:
                if nbytes - self._cost < _LARGEST_ENTRY:
                    break  # the next entry may not fit: wait for credit
                self._spans.popleft()  # nothing there any more (cannot happen: append-only)
                continue
            for row in rows:
                item = (row.raw, row.payload)
                self._buffer.append(item)
                self._cost += entry_cost(item)
            span.next = rows[-1].seq + 1
            if span.next > span.last:
                self._spans.popleft()
        return self._buffer

    def consume(self, n: int) -> list[WireEntry]:
        taken, self._buffer = self._buffer[:n], self._buffer[n:]
        self._cost -= sum(map(entry_cost, taken))
        return taken


async def catch_up(replica: Replica, snap: FrontierSnapshot, theirs: Frontier) -> Outbox:
    """What the peer lacks of ``snap``: per log, from the seq after the peer's tip — from the
    tip itself when the logs forked there, so the peer sees the fork."""
    spans = []
    for span in replica.authority_first(snap.frontier.lacking(theirs)):
        log_id = snap.log_ids[span.log]
        first = span.first
        if span.after is not None:
            held = await replica.entry_id(log_id, first - 1)
            if held is not None and held != span.after:
                first -= 1
        spans.append(Span(log_id, first, span.last))
    return Outbox(spans)


@dataclass(slots=True)
class PeerHolds:
    """What this side knows its peer holds, for live pushes: per log the highest seq, and
    the store position up to which the store's changes have been worked out."""

    seqs: dict[LogId, int] = field(default_factory=dict)
    cursor: int = 0

    def note(self, log: LogId, seq: int) -> None:
        if seq > self.seqs.get(log, 0):
            self.seqs[log] = seq

    def round_done(self, snapshot: FrontierSnapshot, theirs: Frontier | None) -> None:
        """A round ended: the peer holds (or was sent) every log to ``snapshot``, and its
        own frontier ``theirs``."""
        for tip in (*snapshot.frontier.tips, *(theirs.tips if theirs else ())):
            self.note(tip.log, tip.seq)
        self.cursor = max(self.cursor, snapshot.pos)

    async def pushes(self, replica: Replica) -> Outbox:
        """What the store gained past the cursor, per log from the seq the peer holds (taken
        as held once it is in the outbox)."""
        spans = []
        for log in await replica.changed(gt=self.cursor):
            key = (log.writer, log.epoch)
            held = self.seqs.get(key, 0)
            if log.head_seq > held:
                spans.append(Span(log.log_id, held + 1, log.head_seq))
                self.seqs[key] = log.head_seq
            self.cursor = max(self.cursor, log.pos)
        return Outbox(spans)


@dataclass(slots=True)
class _Round:
    snapshot: FrontierSnapshot
    started: float
    outbox: Outbox | None = None
    finished: bool = False


@dataclass(slots=True)
class _Inbound:
    """Fork proofs the peer has sent (bounded by ``max_fork_proofs``)."""

    proofs: set[frozenset[bytes]] = field(default_factory=set)
    count: int = 0


# -- the link ----------------------------------------------------------------------------------


class Link:
    """One connection's sync, from hello to bye."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        host: LinkHost,
        peer: Peer,
        session: Session,
        expected_key: bytes | None = None,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.host = host
        self.peer = peer
        self.session = session
        self.expected_key = expected_key  # the key of the peer's TLS certificate
        self.source: str | None = None  # "peer:<node id>" once the peer is identified
        self._wake = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._hello_deadline = self._loop.time() + host.options.hello_timeout
        self._round: _Round | None = None
        self._last_round = float("-inf")
        self._holds = PeerHolds()
        self._push: Outbox | None = None
        self._forks_seen = 0
        self._proofs_sent: set[frozenset[bytes]] = set()
        self._inbound = _Inbound()
        self._stopped: str | None = None
        self._catch_up = CatchUpLog()

    # -- lifecycle ---------------------------------------------------------------------------

    async def run(self) -> LinkError | None:
        """Sync until either side closes; the error the connection ended with, if any."""
        opts = self.host.options
        self.host.changes.subscribe(self._wake)
        self.peer.close = self.stop
        error: LinkError | None = None
        try:
            grant = Credit(opts.window_entries, opts.window_bytes)
            await self._write(self.session.start() + self.session.send(grant))
            await self._run_loops()
        except LinkError as exc:
            error = exc
            self._tell(exc)
        finally:
            self.host.changes.unsubscribe(self._wake)
            await self._close_stream(abort=isinstance(error, PeerStalled | PeerGone))
            self.host.table.closed(self.peer, self._stopped if error is None else str(error))
            if self.source is not None:
                with contextlib.suppress(NodeError):
                    detail = {"reason": "closed" if error is None else str(error)[:200]}
                    await self.host.replica.audit_peer(Event.PEER_DISCONNECTED, self.source, detail)
        return error

    def stop(self, reason: str | None = None) -> None:
        """Say bye; the link ends when the peer has answered (or after ``close_timeout``).
        ``reason``, if any, is kept as the peer's ``last_error``."""
        self._stopped = reason
        if self.session.our_state in _SPEAKING:
            self.writer.write(self.session.send(Bye()))
        self._wake.set()

    async def _run_loops(self) -> None:
        receive = asyncio.create_task(self._guard(self._receive_loop()))
        drive = asyncio.create_task(self._guard(self._drive_loop()))
        try:
            done, _ = await asyncio.wait({receive, drive}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
            if receive not in done:  # this side said bye: read until the peer's bye or EOF
                async with asyncio.timeout(self.host.options.close_timeout):
                    await receive
        except TimeoutError:
            pass  # the peer did not answer bye; close anyway
        finally:
            for task in (receive, drive):
                task.cancel()
            await asyncio.gather(receive, drive, return_exceptions=True)

    @staticmethod
    async def _guard(loop: Coroutine[Any, Any, None]) -> None:
        """Run one loop, translating what escapes it into a ``LinkError``."""
        try:
            await loop
        except RemoteProtocolError as exc:
            if isinstance(exc, OverLimits):
                REFUSALS.count("frame_cost")
            if exc.field == "eof":  # the stream ended inside a frame: cut, not malformed
                raise PeerGone(f"the connection was cut: {exc}") from exc
            raise PeerProtocolError(str(exc)) from exc
        except LocalProtocolError as exc:
            raise LinkFailed(f"this node broke the protocol: {exc}") from exc
        except LinkError:
            raise
        except NodeError as exc:
            raise LinkFailed(str(exc)) from exc

    def _tell(self, error: LinkError) -> None:
        """Write the error message the peer should see, if it can still be told."""
        data = self.session.error_reply()
        if not data and error.code is not None and self.session.our_state in _SPEAKING:
            with contextlib.suppress(ProtocolError):
                data = self.session.send(Error(error.code, str(error)[:MAX_ERROR_TEXT]))
        if data and not self.writer.is_closing():
            self.writer.write(data)

    async def _close_stream(self, *, abort: bool) -> None:
        if abort:
            self.writer.transport.abort()
            return
        self.writer.close()
        with contextlib.suppress(OSError, TimeoutError):
            async with asyncio.timeout(self.host.options.close_timeout):
                await self.writer.wait_closed()

    # -- IO ----------------------------------------------------------------------------------

    async def _read(self) -> bytes:
        deadline = self._hello_deadline if self.source is None else None
        try:
            async with asyncio.timeout_at(deadline):
                return await self.reader.read(self.host.options.read_chunk)
        except TimeoutError:
            raise PeerSilent("no hello from the peer in time") from None
        except OSError as exc:
            raise PeerGone(f"the connection was cut: {exc}") from exc

    async def _write(self, data: bytes) -> None:
        """Write a frame (already checked by the session) and wait for it to drain."""
        self.writer.write(data)
        try:
            async with asyncio.timeout(self.host.options.write_timeout):
                await self.writer.drain()
        except TimeoutError:
            raise PeerStalled("the peer stopped reading (a write did not drain)") from None
        except OSError as exc:
            raise PeerGone(f"the connection was cut: {exc}") from exc

    # -- receiving ---------------------------------------------------------------------------

    async def _receive_loop(self) -> None:
        s = self.session
        while True:
            event = s.next_event()
            if event is NEED_DATA:
                s.receive_data(await self._read())
                continue
            if isinstance(event, ConnectionClosed):
                if not event.clean and s.our_state in _SPEAKING:
                    raise PeerGone("the peer's stream ended without bye")
                return
            await self._on_message(event)
            self._wake.set()
            if s.our_state is State.CLOSED and s.their_state is State.CLOSED:
                return  # both said bye: nothing more will come

    async def _on_message(self, message: Message) -> None:
        match message:
            case Hello(node=key):
                await self._identify(key)
            case FrontierPart(more=False):
                theirs = self.session.their_frontier
                assert theirs is not None
                self._note_lag(theirs)
            case Entries(entries=items) | Push(entries=items):
                await self._take(items)
            case ForkProof(first=first, second=second):
                await self._take_proof(first, second)
            case Error(code=code, text=text):
                raise PeerClosedWithError(f"the peer closed with error {code}: {text}")
            case Bye():
                if self.session.our_state in _SPEAKING:
                    await self._write(self.session.send(Bye()))
            case _:
                pass  # digests and credit: the session has taken them in

    async def _identify(self, key: bytes) -> None:
        if self.expected_key is not None and key != self.expected_key:
            raise LinkRefused("the hello names another node than the peer's certificate")
        if key == self.host.table.own_key:
            raise LinkRefused("this is a connection to this node itself")
        if self.host.admits is not None and not self.host.admits(key):
            raise LinkRefused(f"node {node_id(key)} is not an admitted member of this mesh")
        try:
            self.host.table.identify(self.peer, key)
        except DuplicateLink as exc:
            raise LinkRefused(str(exc)) from exc
        self.source = f"peer:{node_id(key)}"
        detail = {"address": self.peer.address}
        await self.host.replica.audit_peer(Event.PEER_CONNECTED, self.source, detail)

    async def _take(self, items: tuple[WireEntry, ...]) -> None:
        """One batch: to the store in one transaction, then its credit back."""
        if not items:
            return
        assert self.source is not None  # the session lets entries in only after hello
        report = await self.host.replica.receive(self._note_held(items), source=self.source)
        self.peer.received += len(items)
        self.peer.lag_in = max(0, self.peer.lag_in - report.stored)
        self._catch_up.took(self.source, self.peer.received, self.peer.lag_in)
        self.host.table.touch()
        if report.stored:
            self.host.changes.poke()
        if self.session.our_state in _SPEAKING:
            grant = Credit(len(items), sum(map(entry_cost, items)))
            await self._write(self.session.send(grant))

    def _note_held(self, items: tuple[WireEntry, ...]) -> list[Received]:
        """The peer holds what it sends: never push those entries back to it.  The batch
        for the store, each header decoded once, here; an entry whose header does not
        decode, or whose payload is not the one its header names, goes on as it came, and
        the store rejects it as it would have."""
        batch: list[Received] = []
        for raw, payload in items:
            try:
                entry = Entry.decode(raw, None)
            except ProtocolError:
                batch.append((raw, payload))
                continue
            self._holds.note(entry.header.log, entry.header.seq)
            entry = entry.with_payload(payload)
            try:
                entry.check_payload()
            except ProtocolError:
                batch.append((raw, payload))
                continue
            batch.append(entry)
        return batch

    async def _take_proof(self, first: bytes, second: bytes) -> None:
        inbound = self._inbound
        inbound.count += 1
        if inbound.count > self.host.options.max_fork_proofs:
            raise PeerFlooding(f"more than {self.host.options.max_fork_proofs} fork proofs")
        pair = frozenset((first, second))
        if pair in inbound.proofs:
            return
        inbound.proofs.add(pair)
        self._proofs_sent.add(pair)  # no need to tell the peer its own proof
        assert self.source is not None
        await self.host.replica.take_fork_proof(first, second, source=self.source)

    def _note_lag(self, theirs: Frontier) -> None:
        if self._round is None:
            return
        ours = {t.log: t.seq for t in self._round.snapshot.frontier.tips}
        self.peer.lag_in = sum(max(0, t.seq - ours.get(t.log, 0)) for t in theirs.tips)

    # -- driving -----------------------------------------------------------------------------

    async def _drive_loop(self) -> None:
        while self.session.our_state in _SPEAKING:
            self._wake.clear()
            if self.source is not None:
                await self._step()
            delay = self._next_timer()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()

    async def _step(self) -> None:
        s = self.session
        if s.owes_digest and self._may_answer_round():
            await self._send_digest()
        if s.owes_frontier and self._round is not None:
            await self._send_frontier(self._round.snapshot.frontier)
        if s.may_stream:
            await self._stream()
        if s.our_state is State.LIVE:
            self._finish_round()
            await self._push_changes()
            await self._gossip_forks()
            if s.caught_up and self._round_due():
                await self._send_digest()
        self._note_state()

    def _note_state(self) -> None:
        state = PeerState.LIVE if self.session.caught_up else PeerState.SYNCING
        if self.peer.state is not state and self.peer.state in (PeerState.SYNCING, PeerState.LIVE):
            self.peer.state = state
            self.host.table.touch()

    def _next_timer(self) -> float | None:
        """Seconds until a timer of this link is due: a round to answer or to start."""
        now = self._loop.time()
        if self.session.owes_digest:
            return max(0.0, self._last_round + self.host.options.min_round_interval - now)
        if self.session.caught_up:
            return max(0.0, self._last_round + self.host.options.round_interval - now)
        return None

    def _may_answer_round(self) -> bool:
        since = self._loop.time() - self._last_round
        return self._round is None or since >= self.host.options.min_round_interval

    def _round_due(self) -> bool:
        return self._loop.time() - self._last_round >= self.host.options.round_interval

    async def _send_digest(self) -> None:
        """Snapshot the frontier and send its digest (this round's, docs/protocol.md §4)."""
        snapshot = await self.host.replica.snapshot()
        s = self.session
        if not (s.owes_digest or s.caught_up):
            return  # the connection moved on while the store was read
        self._round = _Round(snapshot, self._loop.time())
        self._last_round = self._round.started
        self._push = None
        await self._write(s.send(FrontierDigest(snapshot.frontier.digest())))

    async def _send_frontier(self, frontier: Frontier) -> None:
        """This round's frontier, in parts when it lists more logs than one message holds."""
        most = self.host.options.frontier_part
        parts = frontier.parts(most)
        if len(parts) > 1 and FRONTIER_PARTS not in self.session.features:
            raise LinkFailed(f"this node holds {len(frontier.tips)} logs, more than one frontier "
                             f"message lists ({most}), and the peer does not offer "
                             f"{FRONTIER_PARTS!r} (protocol 1.1)")  # fmt: skip
        for part in parts:
            await self._write(self.session.send(part))

    async def _stream(self) -> None:
        """Catch-up: what the peer's frontier lacks, in batches within credit; the last
        batch says ``done``."""
        s, r = self.session, self._round
        assert r is not None
        if r.outbox is None:
            theirs = s.their_frontier
            assert theirs is not None
            r.outbox = await catch_up(self.host.replica, r.snapshot, theirs)
            self.peer.lag_out = r.outbox.size
        await self._send_out(r.outbox, catch_up=True)

    async def _send_out(self, box: Outbox, *, catch_up: bool) -> None:
        """Send from ``box`` while credit lasts: ``Entries`` in catch-up, else ``Push``."""
        s = self.session
        while self._may_send(catch_up):
            credit = s.credit
            # One batch is one frame: never read ahead more than a frame's worth.
            limit = min(credit.entries, self.host.options.batch_entries)
            budget = min(credit.nbytes, MAX_FRAME_BYTES)
            items = await box.peek(self.host.replica, entries=limit, nbytes=budget)
            if not self._may_send(catch_up):
                return
            n = s.fits(items)
            if n == 0 and not (catch_up and box.exhausted):
                return  # wait for credit (or for something to push)
            batch = tuple(box.consume(n))
            message: Message = Entries(batch, box.exhausted) if catch_up else Push(batch)
            await self._write(s.send(message))
            self.peer.sent += n
            self.peer.lag_out = max(0, self.peer.lag_out - n)
            if catch_up and box.exhausted:
                return

    def _may_send(self, catch_up: bool) -> bool:
        s = self.session
        return s.may_stream if catch_up else s.our_state is State.LIVE

    def _finish_round(self) -> None:
        """This side has finished its round: the peer now holds (or has been sent) every
        log to this side's snapshot, and its own frontier."""
        r = self._round
        if r is None or r.finished:
            return
        r.finished = True
        theirs = self.session.their_frontier
        self._holds.round_done(r.snapshot, theirs)
        self._push = None
        if theirs is None:
            self.peer.lag_in = self.peer.lag_out = 0
        self.peer.rounds += 1
        self.host.table.touch()

    async def _push_changes(self) -> None:
        """Live: push what the store gained since the last look, per log in seq order,
        from the seq the peer holds."""
        if self._push is None or self._push.exhausted:
            if self.host.changes.marks.pos <= self._holds.cursor:
                return
            self._push = await self._holds.pushes(self.host.replica)
        await self._send_out(self._push, catch_up=False)

    async def _gossip_forks(self) -> None:
        forks = self.host.changes.marks.forks
        if forks == self._forks_seen:
            return
        self._forks_seen = forks
        for first, second in await self.host.replica.fork_proofs():
            pair = frozenset((first, second))
            if pair in self._proofs_sent or self.session.our_state not in _SPEAKING:
                continue
            self._proofs_sent.add(pair)
            await self._write(self.session.send(ForkProof(first, second)))
