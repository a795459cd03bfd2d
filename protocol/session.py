"""The sync session: a pure state machine between bytes and messages (docs/protocol.md).

``receive_data(bytes)`` feeds what the peer sent (``b""`` for end of stream); ``next_event()``
returns the next message, ``NEED_DATA``, or ``ConnectionClosed``; ``send(message)`` checks a
message against the state and the peer's credit and returns the bytes to write.  The session
does no IO, keeps no clock and stores no entries: the transport drives it and the store judges
what the entries are worth.

The same rules apply in both directions (``_state.TRANSITIONS``): what is a
``LocalProtocolError`` to send is a ``RemoteProtocolError`` to receive.  After either, the
session is in ``State.ERROR`` and refuses further use; ``error_reply()`` then gives the
``Error`` message to write before closing — for an unknown major version, the polite refusal
that names the versions this side speaks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final

from protocol._state import TRANSITIONS, State, Step, next_state, state_diagram
from protocol.batch import WireEntry, batch_room
from protocol.credit import Balance, grant, spend
from protocol.errors import LocalProtocolError, ProtocolError, RemoteProtocolError
from protocol.frames import FrameReader, encode_frame
from protocol.frontier import FRONTIER_PARTS, MAX_FRONTIER_TIPS, Frontier, FrontierPart, Tip
from protocol.messages import (
    MAX_ERROR_TEXT,
    PROTOCOL_MAJOR,
    PROTOCOL_MINOR,
    SUPPORTED_MAJORS,
    Bye,
    Credit,
    Entries,
    Error,
    ErrorCode,
    ForkProof,
    FrontierDigest,
    Hello,
    Message,
    Push,
    decode_message,
    encode_message,
)
from protocol.payloads import PARTIAL, Payloads, Want

__all__ = [
    "NEED_DATA",
    "TRANSITIONS",
    "ConnectionClosed",
    "Event",
    "NeedData",
    "Session",
    "State",
    "Step",
    "state_diagram",
    "step_of",
]


class NeedData(Enum):
    """``next_event`` has no whole message yet: feed more bytes."""

    NEED_DATA = "need data"


NEED_DATA: Final = NeedData.NEED_DATA


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """The peer's stream ended; ``clean`` when it said bye (or error) first."""

    clean: bool


Event = Message | NeedData | ConnectionClosed


# Which error code tells the peer about a failure, by the field the failure names.
_CODES = {
    "major": ErrorCode.VERSION,
    "mesh": ErrorCode.MESH,
    "credit": ErrorCode.CREDIT,
    "frame_length": ErrorCode.LIMIT,
    "frontier_size": ErrorCode.LIMIT,
}


def step_of(message: Message) -> Step:
    """The step a message takes its speaker through."""
    match message:
        case Hello():
            return Step.HELLO
        case FrontierDigest():
            return Step.DIGEST
        case FrontierPart(more=more):
            return Step.FRONTIER_PART if more else Step.FRONTIER
        case Entries(done=done):
            return Step.ENTRIES_DONE if done else Step.ENTRIES
        case Push():
            return Step.PUSH
        case Credit():
            return Step.CREDIT
        case ForkProof():
            return Step.FORK_PROOF
        case Error():
            return Step.ERROR
        case Bye():
            return Step.BYE
        case Want():
            return Step.WANT
        case Payloads():
            return Step.PAYLOADS


class _Side:
    """What one side has said: its state, this round's digest and frontier (the tips of its
    parts so far, until the last is in), the credit it may still spend (granted by the other
    side), and the ids of its want the other side has yet to answer."""

    __slots__ = ("asked", "credit", "digest", "frontier", "hello", "parts", "state")

    def __init__(self) -> None:
        self.state = State.IDLE
        self.hello: Hello | None = None
        self.digest: bytes | None = None
        self.frontier: Frontier | None = None
        self.parts: list[Tip] = []
        self.credit = Balance()
        self.asked: tuple[bytes, ...] | None = None

    def new_round(self) -> None:
        self.digest, self.frontier, self.parts = None, None, []


class Session:
    """One end of a sync connection; both ends are alike.  It offers the features it
    implements (``FRONTIER_PARTS``) and ``features``."""

    def __init__(self, *, mesh: bytes, node: bytes, features: Iterable[str] = ()) -> None:
        offered = tuple(sorted({FRONTIER_PARTS, *features}))
        self.hello = Hello(PROTOCOL_MAJOR, PROTOCOL_MINOR, mesh, node, offered)
        self._us = _Side()
        self._them = _Side()
        self._reader = FrameReader()
        self._eof = False
        self._failure: ProtocolError | None = None
        self._reply: bytes = b""

    # -- what the driver reads -----------------------------------------------------------------

    @property
    def our_state(self) -> State:
        return self._us.state

    @property
    def their_state(self) -> State:
        return self._them.state

    @property
    def peer(self) -> Hello | None:
        """The peer's hello, once received."""
        return self._them.hello

    @property
    def features(self) -> frozenset[str]:
        """The features both sides offered (empty until the peer's hello is in)."""
        if self._them.hello is None:
            return frozenset()
        return frozenset(self.hello.features) & frozenset(self._them.hello.features)

    @property
    def our_frontier(self) -> Frontier | None:
        """The frontier this side sent this round, once sent."""
        return self._us.frontier

    @property
    def their_frontier(self) -> Frontier | None:
        """The peer's frontier for this round, once received."""
        return self._them.frontier

    @property
    def owes_digest(self) -> bool:
        """The peer has said hello, or opened a new round, and this side's digest is due."""
        us, them = self._us.state, self._them.state
        if us is State.HELLO:
            return them in (State.HELLO, State.DIGEST)
        return us is State.LIVE and them is State.DIGEST

    @property
    def owes_frontier(self) -> bool:
        """Both digests of this round are in and differ: this side's frontier is due."""
        return self._us.state is State.DIGEST and self._them.digest is not None

    @property
    def may_stream(self) -> bool:
        """This side may send ``Entries`` now: it sent its frontier and has the peer's."""
        return (
            self._us.state in (State.FRONTIER, State.STREAMING) and self._them.frontier is not None
        )

    @property
    def credit(self) -> Balance:
        """What this side may still send: the peer's grants, less what has been sent."""
        return self._us.credit

    @property
    def granted(self) -> Balance:
        """What the peer may still send: this side's grants, less what has arrived."""
        return self._them.credit

    @property
    def caught_up(self) -> bool:
        """Both sides have finished this round (each is ``LIVE``)."""
        return self._us.state is State.LIVE and self._them.state is State.LIVE

    @property
    def wanting(self) -> bool:
        """This side has said a ``Want`` the peer has not answered: it may not say another."""
        return self._us.asked is not None

    @property
    def owed(self) -> tuple[bytes, ...] | None:
        """The ids of the peer's unanswered ``Want``, which this side answers with one
        ``Payloads`` (of some of them, or none); None when there is none."""
        return self._them.asked

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as a message (at most one frame and a chunk)."""
        return self._reader.buffered

    def fits(self, items: Sequence[WireEntry]) -> int:
        """How many leading ``items`` the next ``Entries`` or ``Push`` may carry."""
        credit = self._us.credit
        return batch_room(items, entries=credit.entries, nbytes=credit.nbytes)

    # -- the three verbs -----------------------------------------------------------------------

    def start(self) -> bytes:
        """Send this side's hello."""
        return self.send(self.hello)

    def send(self, message: Message) -> bytes:
        """The frame for ``message``, if this side may say it now; ``LocalProtocolError``
        (and the session fails) if not."""
        self._usable()
        try:
            frame = encode_frame(encode_message(message))
            self._say(self._us, self._them, message, LocalProtocolError)
        except ProtocolError as exc:
            raise self._fail(exc) from None
        return frame

    def receive_data(self, data: bytes) -> None:
        """Bytes from the peer; ``b""`` when its stream has ended."""
        self._usable()
        if self._eof:
            raise self._fail(LocalProtocolError("data after the end of stream", field="eof"))
        if not data:
            self._eof = True
            return
        try:
            self._reader.feed(data)
        except ProtocolError as exc:
            raise self._fail(exc) from None

    def next_event(self) -> Event:
        """The next message from the peer, ``NEED_DATA``, or ``ConnectionClosed``; bad input
        raises ``RemoteProtocolError`` (and the session fails)."""
        self._usable()
        try:
            return self._next_message()
        except ProtocolError as exc:
            raise self._fail(exc) from None

    def _next_message(self) -> Event:
        body = self._reader.next_frame()
        if body is None:
            return self._idle_event()
        message = decode_message(body)
        self._say(self._them, self._us, message, RemoteProtocolError)
        return message

    def error_reply(self) -> bytes:
        """After a failure, once: the ``Error`` frame to write before closing, telling the
        peer what was wrong; ``b""`` when there is nobody left to tell."""
        reply, self._reply = self._reply, b""
        return reply

    # -- the rules -----------------------------------------------------------------------------

    def _say(
        self, speaker: _Side, listener: _Side, message: Message, error: type[ProtocolError]
    ) -> None:
        """Check ``message`` said by ``speaker`` against the table and the cross-direction
        conditions, then take its step and effects."""
        step = step_of(message)
        target = next_state(speaker.state, step)
        if target is None:
            raise error(f"{step.value} is not allowed in state {speaker.state.name}", field="state")
        match message:
            case Hello():
                self._check_hello(message, error)
                speaker.hello = message
            case FrontierDigest(digest=digest):
                if listener.state not in (State.HELLO, State.DIGEST, State.LIVE):
                    raise error("a digest waits for hello and for the round to end", field="state")
                if listener.state is not State.DIGEST:  # this digest opens a new round
                    for side in (speaker, listener):
                        side.new_round()
                speaker.digest = digest
            case FrontierPart():
                self._take_part(speaker, listener, message, error)
            case Entries(entries=items) | Push(entries=items):
                if step is not Step.PUSH and listener.frontier is None:
                    raise error("entries wait for the receiver's frontier", field="state")
                if any(type(payload) is str for _, payload in items):
                    self._need_partial("a workspace tag needs", error)
                speaker.credit = spend(speaker.credit, items, error)
            case Want(ids=ids):
                self._need_partial("a want needs", error)
                if speaker.asked is not None:
                    raise error("a want waits for the answer to the one before", field="state")
                speaker.asked = ids
            case Payloads():
                self._take_answer(listener, message, error)
            case Credit(entries=entries, nbytes=nbytes):
                listener.credit = grant(listener.credit, entries, nbytes, error)
        speaker.state = target
        if step is Step.DIGEST and speaker.digest == listener.digest:
            self._match(speaker, listener)

    def _check_hello(self, hello: Hello, error: type[ProtocolError]) -> None:
        if hello.major not in SUPPORTED_MAJORS:
            spoken = ", ".join(map(str, SUPPORTED_MAJORS))
            raise error(
                f"protocol {hello.major} is not spoken here; this side speaks {spoken}",
                field="major",
            )
        if hello.mesh != self.hello.mesh:
            raise error(f"mesh {hello.mesh.hex()} is not this mesh", field="mesh")

    def _take_part(
        self, speaker: _Side, listener: _Side, part: FrontierPart, error: type[ProtocolError]
    ) -> None:
        if listener.digest is None:
            raise error("a frontier waits for both digests", field="state")
        if speaker.digest == listener.digest:
            raise error("the digests match: no frontier is exchanged", field="state")
        if part.more and FRONTIER_PARTS not in self.features:
            raise error(
                f"a frontier in parts needs {FRONTIER_PARTS!r} on both sides", field="state"
            )
        tips = speaker.parts
        if tips and part.tips and part.tips[0].log <= tips[-1].log:
            raise error("must be strictly ascending across parts", field="tips")
        if len(tips) + len(part.tips) > MAX_FRONTIER_TIPS:
            raise error(f"a frontier lists at most {MAX_FRONTIER_TIPS} logs", field="frontier_size")
        tips.extend(part.tips)
        if part.more:
            return
        frontier, speaker.parts = Frontier(tuple(tips)), []
        if frontier.digest() != speaker.digest:
            raise error("the frontier does not match the digest sent before it", field="digest")
        speaker.frontier = frontier

    def _take_answer(self, listener: _Side, answer: Payloads, error: type[ProtocolError]) -> None:
        """``answer`` answers ``listener``'s want, of which it names only ids asked for."""
        self._need_partial("payloads need", error)
        if listener.asked is None:
            raise error("payloads answer a want, and none is outstanding", field="state")
        asked = iter(listener.asked)  # both ascending: each id is found past the one before
        if not all(entry_id in asked for entry_id in answer.ids):
            raise error("answers an id the want did not ask for", field="items")
        listener.asked = None

    def _need_partial(self, what: str, error: type[ProtocolError]) -> None:
        if PARTIAL not in self.features:
            raise error(f"{what} {PARTIAL!r} on both sides", field="state")

    @staticmethod
    def _match(a: _Side, b: _Side) -> None:
        """Both digests of the round are in and equal: neither side has anything to send."""
        a.state = b.state = TRANSITIONS[(a.state, Step.DIGESTS_MATCH)]

    # -- ends ----------------------------------------------------------------------------------

    def _idle_event(self) -> NeedData | ConnectionClosed:
        if not self._eof:
            return NEED_DATA
        if self._reader.buffered:
            raise RemoteProtocolError("the stream ended inside a frame", field="eof")
        return ConnectionClosed(clean=self._them.state is State.CLOSED)

    def _usable(self) -> None:
        if self._failure is not None:
            raise LocalProtocolError(
                f"the session has failed ({self._failure}) and is not usable", field="session"
            )

    def _fail(self, exc: ProtocolError) -> ProtocolError:
        """Fail the session with ``exc``; return it without its traceback, whose frames hold
        the frame's body and what was decoded of it — raised again, it starts from the
        caller, and they are freed at once (a cycle would keep them until a collection), as is
        what the session had buffered (docs/protocol.md §2)."""
        self._failure = type(exc)(exc.hint, field=exc.field)
        self._reader = FrameReader()  # a failed session reads nothing more
        peer_listening = self._us.state is not State.CLOSED and not self._eof
        self._us.state = self._them.state = State.ERROR
        if peer_listening:
            self._reply = encode_frame(encode_message(_error_for(exc)))
        return exc.with_traceback(None)


def _error_for(exc: ProtocolError) -> Error:
    if isinstance(exc, RemoteProtocolError):
        code = _CODES.get(exc.field or "", ErrorCode.PROTOCOL)
    else:
        code = ErrorCode.INTERNAL
    versions = SUPPORTED_MAJORS if code is ErrorCode.VERSION else ()
    return Error(code, str(exc)[:MAX_ERROR_TEXT], versions)
