"""The SR view's stored states and digests are canonical msgpack, however they are built."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from node.views.fold import SrState, digests
from protocol.canonical import encode_canonical

_text = st.text(max_size=20)
_ids = st.lists(st.uuids().map(str), max_size=4, unique=True).map(tuple)

states = st.builds(
    SrState,
    sr_id=st.uuids().map(str),
    exists=st.booleans(),
    workspace=st.one_of(st.none(), _text),
    owner=st.one_of(st.none(), _text),
    created_time=st.one_of(st.none(), st.integers(0, 2**48)),
    title=_text,
    text=_text,
    links=_ids,
    conversational=st.booleans(),
    private_fields=st.dictionaries(_text, _text, max_size=4),
    tags=st.lists(_text, max_size=4, unique=True).map(tuple),
    content_time=st.one_of(st.none(), st.integers(0, 2**48)),
    lane=_text,
    lane_uuid=st.one_of(st.none(), st.uuids().map(str)),
    visibility=st.sampled_from(["workspace", "private"]),
    has_correction=st.booleans(),
    has_adjustment=st.booleans(),
    ingest_time=st.one_of(st.none(), st.integers(0, 2**48)),
    node_id=st.one_of(st.none(), _text),
)


def _sha(value: object) -> bytes:
    return hashlib.sha256(encode_canonical(value)).digest()


@settings(max_examples=200, deadline=None)
@given(states)
def test_stored_states_and_digests_are_canonical(state: SrState) -> None:
    assert state.canonical() == encode_canonical(state.to_doc())
    assert SrState.from_doc(state.to_doc()) == state
    full, public, links = digests(state)
    if not state.exists:
        assert (full, public, links) == (b"", b"", b"")
        return
    doc = state.compared()
    linked = doc.pop("links")
    assert full == _sha(doc)
    doc.pop("private_fields")
    assert public == _sha(doc)
    assert links == _sha(linked)


def test_state_maps_are_spelled_in_canonical_key_order() -> None:
    state = SrState("s", private_fields={"b": "2", "a": "1"})
    doc = state.to_doc()
    assert list(doc) == sorted(name for name in SrState.__slots__ if not name.startswith("_"))
    assert list(doc["private_fields"]) == ["a", "b"]
    assert list(state.compared()) == sorted(
        (
            "title",
            "text",
            "links",
            "conversational",
            "private_fields",
            "tags",
            "content_time",
            "lane",
            "lane_uuid",
            "visibility",
            "has_correction",
            "has_adjustment",
        )
    )


def test_a_states_encoding_is_made_once_and_not_compared() -> None:
    state = SrState("s", title="t")
    assert state.canonical() is state.canonical()
    assert state == SrState("s", title="t")
    assert SrState.from_doc(state.to_doc()) == state
