"""One sync connection: a thin loop between an asyncio stream pair, a
``protocol.session.Session`` and the store (docs/protocol.md §6).

Two tasks share the session.  The *receive* loop reads at most one chunk at a time, takes
every message the session has before reading more (so it never holds more than one frame and
a chunk), hands entries to the store's receive path one batch per transaction, and grants the
batch's credit back once it is committed — so a peer never has more in flight than the
credit.  The *drive* loop does whatever is due: the digest once the peer's hello is in, the
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

from node.errors import NodeError
from node.identity import node_id
from node.logging import get_logger
from node.mesh.errors import (
    LinkError,
    LinkFailed,
    LinkRefused,
    PeerClosedWithError,
    PeerGone,
    PeerSilent,
    PeerStalled,
    guarded,
)
from node.mesh.fetch import Fetch
from node.mesh.host import LinkHost, LinkOptions
from node.mesh.outbox import Outbox, PeerHolds, catch_up, refilled
from node.mesh.peers import DuplicateLink, Peer, PeerState
from node.mesh.progress import CatchUpLog
from node.mesh.proofs import ForkProofs
from node.mesh.rounds import Rounds
from node.store import AuditEvent, Received
from protocol.batch import WireEntry, entry_cost
from protocol.errors import ProtocolError
from protocol.frames import MAX_FRAME_BYTES
from protocol.frontier import FRONTIER_PARTS, Frontier, FrontierPart
from protocol.messages import (
    MAX_ERROR_TEXT,
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

__all__ = ["Link", "LinkHost", "LinkOptions"]

# Batches of entries handed to the store at once per link: two, so the next waits while one
# is written.
STORING = 2
_log = get_logger("node.mesh.link")
_SPEAKING = (State.HELLO, State.DIGEST, State.FRONTIER, State.STREAMING, State.LIVE)


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
        self._rounds = Rounds(host.options, self._loop.time)
        self._holds = PeerHolds()
        self._push: Outbox | None = None
        self._fetch: Fetch | None = None  # once the peer is identified
        self._proofs = ForkProofs(host.options.max_fork_proofs)
        self._stopped: str | None = None
        self._catch_up = CatchUpLog()
        self._storing: deque[asyncio.Task[None]] = deque()  # batches being stored, in order
        self._ending = False  # the loops have ended: what is being stored sends no credit

    # -- lifecycle ---------------------------------------------------------------------------

    async def run(self) -> LinkError | None:
        """Sync until either side closes; the error the connection ended with, if any."""
        opts = self.host.options
        self.host.commits.subscribe(self._wake)
        self.peer.close = self.stop
        error: LinkError | None = None
        try:
            grant = Credit(opts.credit_entries, opts.credit_bytes)
            await self._write(self.session.start() + self.session.send(grant))
            await self._run_loops()
        except LinkError as exc:
            error = exc
            self._tell(exc)
        finally:
            self.host.commits.unsubscribe(self._wake)
            if self._fetch is not None:
                self.host.fetches.pop(self._fetch, None)
            await self._close_stream(abort=isinstance(error, PeerStalled | PeerGone))
            self.host.table.closed(self.peer, self._stopped if error is None else str(error))
            self._log_closed(error)
            if self.source is not None:
                with contextlib.suppress(NodeError):
                    detail = {"reason": "closed" if error is None else str(error)[:200]}
                    await self.host.replica.audit_peer(
                        AuditEvent.PEER_DISCONNECTED, self.source, detail
                    )
        return error

    def _log_closed(self, error: LinkError | None) -> None:
        """A link that opened closes at ``info``, whatever ended it; one that never got as
        far as the peer's hello only when it failed (docs/operations.md §Logs)."""
        if self.source is not None or error is not None:
            _log.info(
                "sync link closed",
                peer=self.source,
                address=self.peer.address,
                error=None if error is None else str(error),
            )

    def stop(self, reason: str | None = None) -> None:
        """Say bye; the link ends when the peer has answered (or after ``close_timeout``).
        ``reason``, if any, is kept as the peer's ``last_error``."""
        self._stopped = reason
        if self.session.our_state in _SPEAKING:
            self.writer.write(self.session.send(Bye()))
        self._wake.set()

    async def _run_loops(self) -> None:
        receive = asyncio.create_task(guarded(self._receive_loop()))
        drive = asyncio.create_task(guarded(self._drive_loop()))
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
            # A batch handed to the store is stored whatever becomes of the connection: let
            # it finish, so that it is counted (its credit is not sent).
            self._ending = True
            await asyncio.gather(*self._storing, return_exceptions=True)

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
                await self._stored()
                if not event.clean and s.our_state in _SPEAKING:
                    raise PeerGone("the peer's stream ended without bye")
                return
            if not isinstance(event, Entries | Push):
                await self._stored()
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
            case Payloads():
                await self._take_payloads(message)
            case Error(code=code, text=text):
                raise PeerClosedWithError(f"the peer closed with error {code}: {text}")
            case Bye():
                if self.session.our_state in _SPEAKING:
                    await self._write(self.session.send(Bye()))
            case _:
                pass  # digests, credit and wants: the session has taken them in

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
        _log.info(
            "sync link opened",
            peer=self.source,
            address=self.peer.address,
            direction="outbound" if self.peer.outbound else "inbound",
        )
        self._fetch = Fetch(
            self.host.replica, key, self.session.features, retry=self.host.options.payload_retry
        )
        self.host.fetches[self._fetch] = self._wake
        hello = self.session.peer
        await self.host.replica.note_features(key, hello.features if hello else ())
        detail = {"address": self.peer.address}
        await self.host.replica.audit_peer(AuditEvent.PEER_CONNECTED, self.source, detail)

    async def _take(self, items: tuple[WireEntry, ...]) -> None:
        """One batch: to the store in one transaction, then its credit back.  Up to
        ``STORING`` batches are handed to the store at once (they commit in the order they
        came), so the writer finds the next one waiting; the credit still bounds them."""
        if not items:
            return
        assert self.source is not None  # the session lets entries in only after hello
        while len(self._storing) >= STORING:
            await self._first_stored()
        received = self._holds.received(items)
        # The task hands the batch to the store's writer at its first step, so batches are
        # queued in the order they were read.
        task = asyncio.create_task(self._store(items, received, self.source))
        task.add_done_callback(self._stored_one)
        self._storing.append(task)

    async def _store(
        self, items: tuple[WireEntry, ...], received: list[Received], source: str
    ) -> None:
        report = await self.host.replica.receive(received, source=source)
        self.peer.received += len(items)
        self.peer.lag_in = max(0, self.peer.lag_in - report.stored)
        self._catch_up.took(source, self.peer.received, self.peer.lag_in)
        self.host.table.touch()
        if report.stored:
            self.host.commits.poke()
        self.host.filled(self._fetch, report.filled_at)
        if self.session.our_state in _SPEAKING and not self._ending:
            grant = Credit(len(items), sum(map(entry_cost, items)))
            await self._write(self.session.send(grant))

    async def _stored(self) -> None:
        """Wait for every batch being stored: before a message that is not entries, and
        before a round's snapshot (which must hold what the round before brought)."""
        while self._storing:
            await self._first_stored()

    def _stored_one(self, task: asyncio.Task[None]) -> None:
        """A batch that failed to be stored (a full disk, say) ends the link at once, though
        no message is waiting on it: the drive loop wakes and raises its error."""
        if not task.cancelled() and task.exception() is not None:
            self._wake.set()

    def _failed_stores(self) -> None:
        """Raise the error of the first batch whose storing failed, if one has."""
        for task in self._storing:
            if task.done() and not task.cancelled() and task.exception() is not None:
                task.result()

    async def _first_stored(self) -> None:
        task = self._storing[0]
        await task  # (both loops may wait for it: whichever sees it first takes it off)
        if self._storing and self._storing[0] is task:
            self._storing.popleft()

    async def _take_payloads(self, answer: Payloads) -> None:
        assert self._fetch is not None
        assert self.source is not None
        received = self._fetch.received(answer)
        if received:
            report = await self.host.replica.receive(received, source=self.source)
            self.host.filled(self._fetch, report.filled_at)

    async def _take_proof(self, first: bytes, second: bytes) -> None:
        if not self._proofs.taken(first, second):
            return
        assert self.source is not None
        await self.host.replica.take_fork_proof(first, second, source=self.source)

    def _note_lag(self, theirs: Frontier) -> None:
        if self._rounds.current is None:
            return
        ours = {t.log: t.seq for t in self._rounds.current.snapshot.frontier.tips}
        self.peer.lag_in = sum(max(0, t.seq - ours.get(t.log, 0)) for t in theirs.tips)

    # -- driving -----------------------------------------------------------------------------

    async def _drive_loop(self) -> None:
        while self.session.our_state in _SPEAKING:
            self._wake.clear()
            self._failed_stores()
            if self.source is not None:
                await self._step()
            delay = self._rounds.next_timer(self.session)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()

    async def _step(self) -> None:
        s = self.session
        if s.owes_digest and self._rounds.may_answer():
            await self._send_digest()
        if s.owes_frontier and self._rounds.current is not None:
            await self._send_frontier(self._rounds.current.snapshot.frontier)
        if s.may_stream:
            await self._stream()
        if s.our_state is State.LIVE:
            self._finish_round()
            await self._push_changes()
            await self._gossip_forks()
            if s.caught_up and self._rounds.due():
                await self._send_digest()
        await self._payloads()
        self._note_state()

    async def _payloads(self) -> None:
        """Answer the peer's want, if one is owed; once both sides are live, ask for the
        payloads this node lacks and the peer may hold (docs/partial.md)."""
        s, fetch = self.session, self._fetch
        assert fetch is not None
        if s.owed is not None and s.our_state in _SPEAKING:
            await self._write(s.send(await fetch.answer(s.owed)))
        if s.caught_up and not s.wanting:
            want = await fetch.want(self._loop.time())
            if want is not None and s.caught_up:
                await self._write(s.send(want))

    def _note_state(self) -> None:
        state = PeerState.LIVE if self.session.caught_up else PeerState.SYNCING
        if self.peer.state is not state and self.peer.state in (PeerState.SYNCING, PeerState.LIVE):
            if state is PeerState.LIVE:
                self.host.table.live(self.peer)
                return
            self.peer.state = state
            self.host.table.touch()

    async def _send_digest(self) -> None:
        """Snapshot the frontier and send its digest (this round's, docs/protocol.md §4)."""
        await self._stored()
        snapshot = await self.host.replica.snapshot()
        s = self.session
        if not (s.owes_digest or s.caught_up):
            return  # the connection moved on while the store was read
        self._rounds.start(snapshot)
        self._push = None
        await self._write(s.send(FrontierDigest(snapshot.frontier.digest())))

    async def _send_frontier(self, frontier: Frontier) -> None:
        """This round's frontier, in parts when it lists more logs than one message holds."""
        most = self.host.options.frontier_part
        parts = frontier.parts(most)
        if len(parts) > 1 and FRONTIER_PARTS not in self.session.features:
            raise LinkFailed(
                f"this node holds {len(frontier.tips)} logs, more than one frontier "
                f"message lists ({most}), and the peer does not offer "
                f"{FRONTIER_PARTS!r} (protocol 1.1)"
            )
        for part in parts:
            await self._write(self.session.send(part))

    async def _stream(self) -> None:
        """Catch-up: what the peer's frontier lacks, in batches within credit; the last
        batch says ``done``."""
        s, r = self.session, self._rounds.current
        assert r is not None
        if r.outbox is None:
            theirs = s.their_frontier
            assert theirs is not None
            assert self._fetch is not None
            r.outbox = await catch_up(self.host.replica, r.snapshot, theirs, self._fetch.wire)
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
        r = self._rounds.current
        if r is None or r.finished:
            return
        r.finished = True
        theirs = self.session.their_frontier
        self._holds.round_done(r.snapshot, theirs)
        self._push = None
        if self._fetch is not None:
            self._fetch.again()
        if theirs is None:
            self.peer.lag_in = self.peer.lag_out = 0
        self.peer.rounds += 1
        self.host.table.touch()

    async def _push_changes(self) -> None:
        """Live: push what the store gained since the last look, per log in seq order,
        from the seq the peer holds."""
        assert self._fetch is not None
        if self._push is None or self._push.exhausted:
            if refills := self._fetch.take_refills():
                self._push = refilled(refills, self._fetch.wire)
            elif self.host.commits.marks.pos <= self._holds.cursor:
                return
            else:
                self._push = await self._holds.pushes(self.host.replica, self._fetch.wire)
        await self._send_out(self._push, catch_up=False)

    async def _gossip_forks(self) -> None:
        forks = self.host.commits.marks.forks
        if forks == self._proofs.forks_seen:
            return
        self._proofs.forks_seen = forks
        for first, second in await self.host.replica.fork_proofs():
            if self.session.our_state not in _SPEAKING or not self._proofs.to_tell(first, second):
                continue
            await self._write(self.session.send(ForkProof(first, second)))
