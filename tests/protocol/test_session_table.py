"""The transition table is the single source: every (state, step) the session accepts, sending
or receiving, is in the table and leads where the table says; every pair not in it is refused;
and docs/protocol.md shows the diagram generated from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from linkkit import LOG_A, LOG_B, Replica, deliver, frame, pair_in

from protocol.errors import LocalProtocolError, RemoteProtocolError
from protocol.frontier import FrontierPart
from protocol.messages import Bye, Credit, Entries, Error, ForkProof, FrontierDigest, Message, Push
from protocol.payloads import PARTIAL, Answer, Payloads, Want
from protocol.session import TRANSITIONS, Session, State, Step, state_diagram, step_of
from protocol.wire import MessageType

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
STATES = [s for s in State if s is not State.ERROR]


FRONTIER_A = Replica(LOG_A[:1]).frontier()  # what pair_in's a sends as its frontier
ASKED = tuple(sorted(e.id for e in LOG_A))


def _sample(step: Step, a: Session) -> Message:
    """A message of ``step`` whose contents meet every condition but the state's."""
    samples: dict[Step, Message] = {
        Step.HELLO: a.hello,
        Step.DIGEST: FrontierDigest(FRONTIER_A.digest()),
        Step.FRONTIER_PART: FrontierPart(FRONTIER_A.tips, more=True),
        Step.FRONTIER: FrontierPart(FRONTIER_A.tips),
        Step.ENTRIES: Entries.of(LOG_A[:1]),
        Step.ENTRIES_DONE: Entries(done=True),
        Step.PUSH: Push.of(LOG_A[:1]),
        Step.CREDIT: Credit(1, 1),
        Step.FORK_PROOF: ForkProof(LOG_A[0].raw, LOG_B[0].raw),
        Step.ERROR: Error(1, "stop"),
        Step.BYE: Bye(),
        Step.WANT: Want(ASKED),
        Step.PAYLOADS: Payloads(((ASKED[0], Answer.ABSENT),)),
    }
    return samples[step]


def _pair_for(state: State, step: Step) -> tuple[Session, Session]:
    """``pair_in(state)`` offering ``partial``, with ``b``'s want outstanding when ``step`` is
    an answer to one and ``b`` may still say it."""
    a, b = pair_in(state, features=(PARTIAL,))
    if step is Step.PAYLOADS and (b.our_state, Step.WANT) in TRANSITIONS:
        deliver(b.send(Want(ASKED)), a)
    return a, b


MESSAGE_STEPS = [s for s in Step if s is not Step.DIGESTS_MATCH]
PAIRS = [(state, step) for state in STATES for step in MESSAGE_STEPS]


@pytest.mark.parametrize(("state", "step"), PAIRS, ids=[f"{s.name}-{t.name}" for s, t in PAIRS])
def test_sending_is_allowed_exactly_where_the_table_says(state: State, step: Step) -> None:
    a, _ = _pair_for(state, step)
    message = _sample(step, a)
    target = TRANSITIONS.get((state, step))
    if target is None:
        with pytest.raises(LocalProtocolError, match="not allowed in state"):
            a.send(message)
        assert a.our_state is State.ERROR
    else:
        a.send(message)
        assert a.our_state is target


@pytest.mark.parametrize(("state", "step"), PAIRS, ids=[f"{s.name}-{t.name}" for s, t in PAIRS])
def test_receiving_is_allowed_exactly_where_the_table_says(state: State, step: Step) -> None:
    a, b = _pair_for(state, step)
    message = _sample(step, a)
    target = TRANSITIONS.get((state, step))
    if target is None:
        with pytest.raises(RemoteProtocolError, match="not allowed in state"):
            deliver(frame(message), b)
        assert b.their_state is State.ERROR
    else:
        assert deliver(frame(message), b) == [message]
        assert b.their_state is target


def test_every_message_type_has_a_step_and_every_step_but_the_match_a_message() -> None:
    a, _ = pair_in(State.LIVE)
    seen = {step_of(_sample(step, a)) for step in MESSAGE_STEPS}
    assert seen == set(MESSAGE_STEPS)
    assert {type(_sample(step, a)).TYPE for step in MESSAGE_STEPS} == set(MessageType)


def test_equal_digests_move_both_sides_live_through_the_table() -> None:
    a, b = pair_in(State.HELLO)
    same = FrontierDigest(b"\x07" * 32)
    deliver(a.send(same), b)
    assert (a.our_state, b.their_state) == (State.DIGEST, State.DIGEST)
    deliver(b.send(same), a)
    target = TRANSITIONS[(State.DIGEST, Step.DIGESTS_MATCH)]
    assert a.our_state is a.their_state is b.our_state is b.their_state is target
    assert a.caught_up
    assert b.caught_up


def test_the_table_names_only_states_and_steps_that_exist_and_error_is_never_a_target() -> None:
    assert all(isinstance(s, State) and isinstance(t, Step) for s, t in TRANSITIONS)
    assert State.ERROR not in {s for s, _ in TRANSITIONS} | set(TRANSITIONS.values())
    assert not [t for (s, t) in TRANSITIONS if s is State.CLOSED]


def test_the_diagram_is_generated_from_the_table() -> None:
    diagram = state_diagram()
    edges = re.findall(r"^    (\w+) --> (\w+): (.+)$", diagram, re.M)
    listed = {(State[s], t.strip(), State[d]) for s, d, steps in edges for t in steps.split(",")}
    assert listed == {(s, step.value, d) for (s, step), d in TRANSITIONS.items()}


def test_the_spec_shows_the_generated_diagram() -> None:
    text = DOC.read_text("utf-8")
    blocks = re.findall(r"```mermaid\n(.*?)```", text, re.S)
    assert state_diagram() in blocks, (
        "docs/protocol.md §5 must hold, as a ```mermaid block, exactly what "
        "protocol.session.state_diagram() returns"
    )
