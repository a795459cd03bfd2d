"""The receive path (docs/entries.md §Receiving entries).

Bad input is rejected (audited, rate-limited per source) or parked in the pending area, and in
both cases leaves no header, payload, log or view row; authentic entries are stored by the one
rule whether they arrive alone or in a run; payload-absent headers fill in later; unknown kinds
are stored but not applied.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import itertools
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.node import Node
from node.store import Received, StoreOptions
from protocol.canonical import encode_canonical
from protocol.entry import MAX_PAYLOAD_BYTES, Entry, payload_digest
from protocol.kinds import encode_payload
from protocol.signing import SigningKey, authenticate
from tests.node.helpers import (
    ForeignWriter,
    admit,
    counts,
    digest,
    events,
    held_entries,
    pending,
    sr_payload,
)

# -- helpers -----------------------------------------------------------------------------------


def craft(key: SigningKey, fields: list[Any]) -> bytes:
    """Raw header bytes for ``fields`` (the ten signed fields, any values), really signed."""
    sig = key.sign(msgpack.packb(fields, use_bin_type=True))
    return msgpack.packb([*fields, sig], use_bin_type=True)


def forge(entry: Entry, byte: int = 0) -> Entry:
    """The same header with one signature bit flipped (so a different id)."""
    sig = bytearray(entry.header.sig)
    sig[byte] ^= 1
    header = dataclasses.replace(entry.header, sig=bytes(sig))
    return Entry.of(header, entry.payload)


def replace_last(writer: ForeignWriter, entry: Entry) -> Entry:
    """Make ``entry`` the writer's newest, so the next entry links to it."""
    writer.entries[-1] = entry
    return entry


async def stored(node: Node) -> dict[bytes, tuple[int, bool, bool]]:
    """Every stored header id → (seq, applied, has payload)."""
    return {
        hashlib.sha256(e.raw).digest(): (e.seq, e.applied, e.payload is not None)
        for _, e in await held_entries(node)
    }


async def head_of(node: Node, writer: ForeignWriter) -> tuple[int, bytes | None]:
    reader = node.reader()
    for log in await reader.select_logs():
        if (log.writer, log.epoch) == (writer.key.public, writer.epoch):
            return log.head_seq, log.head_id
    return 0, None


async def sr_ids(node: Node) -> set[str]:
    reader = node.reader()
    return {r[0] for r in await reader.fetchall("SELECT sr_id FROM srs WHERE live = 1")}


def sr_of(entry: Entry) -> str:
    assert entry.payload is not None
    value: str = msgpack.unpackb(entry.payload)["sr_id"]
    return value


# -- 1. bad input: rejected, audited, nothing stored ---------------------------------------------

BadInput = Callable[[ForeignWriter], Received]


def _with_field(index: int, value: Any, *, payload: bool = True) -> BadInput:
    def build(fw: ForeignWriter) -> Received:
        entry = fw.next()
        fields = entry.header.signed_part()
        fields[index] = value
        return craft(fw.key, fields), entry.payload if payload else None

    return build


def _tampered_payload(fw: ForeignWriter) -> Received:
    entry = fw.next()
    assert entry.payload is not None
    return entry.raw, entry.payload[:-1] + bytes([entry.payload[-1] ^ 1])


def _short_payload(fw: ForeignWriter) -> Received:
    entry = fw.next()
    assert entry.payload is not None
    return entry.raw, entry.payload[:-1]


def _tampered_entry_object(fw: ForeignWriter) -> Received:
    entry = fw.next()
    other = encode_payload("sr.put", sr_payload("00000000-0000-7000-8000-0000000000ff"))
    return Entry(entry.header, entry.raw, entry.id, other)


def _other_mesh(_fw: ForeignWriter) -> Received:
    return ForeignWriter(b"\x99" * 16).next()


def _oversized_payload(fw: ForeignWriter) -> Received:
    big = b"\x00" * (MAX_PAYLOAD_BYTES + 1)
    fields = fw.next().header.signed_part()
    fields[8], fields[9] = payload_digest(big), len(big)
    return craft(fw.key, fields), big


def _trailing_byte(fw: ForeignWriter) -> Received:
    entry = fw.next()
    return entry.raw + b"\x00", entry.payload


def _garbage(_fw: ForeignWriter) -> Received:
    return b"\xc1\x00\xff", None


def _schema_payload(payload: dict[str, Any], kind: str = "sr.put") -> BadInput:
    def build(fw: ForeignWriter) -> Received:
        return fw.next(kind, raw_payload=encode_canonical(payload))

    return build


def _unsorted_payload(fw: ForeignWriter) -> Received:
    # Canonical maps have sorted keys; this one is valid msgpack but not canonical.
    body = sr_payload("00000000-0000-7000-8000-000000000001")
    data = msgpack.packb(dict(reversed(list(body.items()))), use_bin_type=True)
    return fw.next(raw_payload=data)


_GOOD_SR = sr_payload("00000000-0000-7000-8000-000000000001", title="t")

BAD_INPUTS: dict[str, tuple[BadInput, str]] = {
    "payload hash": (_tampered_payload, "hash differs from payload_hash"),
    "payload length": (_short_payload, "length differs from payload_len"),
    "payload hash (Entry object)": (_tampered_entry_object, "payload"),
    "mesh id": (_other_mesh, "another mesh"),
    "envelope version 2": (_with_field(0, 2), "unknown envelope version 2"),
    "oversized header": (_with_field(1, b"m" * 600), "exceeds the limit of 512"),
    "oversized payload": (_oversized_payload, "payload_len"),
    "seq as text": (_with_field(4, "1"), "seq"),
    "seq zero": (_with_field(4, 0), "seq"),
    "mesh as text": (_with_field(1, "m" * 16), "mesh"),
    "writer too short": (_with_field(2, b"w" * 31), "writer"),
    "prev as text": (_with_field(5, "p" * 32), "prev"),
    "hlc counter as text": (_with_field(6, [1_790_000_000_001, "0"]), "hlc"),
    "hlc not a pair": (_with_field(6, [1_790_000_000_001]), "hlc"),
    "kind as int": (_with_field(7, 7), "kind"),
    "payload_len negative": (_with_field(9, -1, payload=False), "payload_len"),
    "trailing byte": (_trailing_byte, "header"),
    "not msgpack": (_garbage, "header"),
    "schema: bad sr_id": (_schema_payload(_GOOD_SR | {"sr_id": "not-a-uuid"}), "sr_id"),
    "schema: missing workspace": (
        _schema_payload({k: v for k, v in _GOOD_SR.items() if k != "workspace"}),
        "workspace",
    ),
    "schema: title not text": (_schema_payload(_GOOD_SR | {"title": 5}), "title"),
    "schema: episode without id": (
        _schema_payload(
            {"vault": "team", "caller": "a", "channel": "api", "episode_type": "t"},
            kind="episode.record",
        ),
        "id",
    ),
    "schema: not a map": (_schema_payload([1, 2, 3]), "payload"),  # type: ignore[arg-type]
    "payload not canonical": (_unsorted_payload, "canonical"),
}


@pytest.mark.asyncio
@pytest.mark.parametrize("prechecked", [False, True], ids=["received", "prechecked first"])
@pytest.mark.parametrize("case", list(BAD_INPUTS))
async def test_bad_input_is_rejected_and_nothing_is_stored(
    node: Node, foreign: ForeignWriter, case: str, prechecked: bool
) -> None:
    """Alike whether the pre-checks run in the receive or before it (``Store.precheck``, as
    a bundle import does while the write lock is free)."""
    build, reason = BAD_INPUTS[case]
    item = build(foreign)
    before, before_digest = await counts(node), await digest(node)
    before_audit = await events(node, "entry_rejected")

    items = node.ingest.precheck([item]) if prechecked else [item]
    report = await node.receive(items, source="peer")

    assert (report.rejected, report.stored, report.pending) == (1, 0, 0)
    assert await counts(node) == before
    assert await digest(node) == before_digest
    assert await pending(node) == set()
    rejected = (await events(node, "entry_rejected"))[len(before_audit) :]
    assert len(rejected) == 1
    assert rejected[0].detail["source"] == "peer"
    assert rejected[0].detail["count"] == 1
    assert reason in rejected[0].detail["reason"]
    assert await events(node, "sr_synced") == []


@pytest.mark.asyncio
async def test_a_bad_entry_does_not_spoil_the_good_ones_beside_it(
    node: Node, foreign: ForeignWriter
) -> None:
    good = foreign.run(3)
    other = ForeignWriter(node.info.mesh, seed=b"\x08" * 32)
    bad = _tampered_payload(other)
    report = await node.receive([good[0], bad, good[1]], source="peer")
    assert (report.stored, report.rejected) == (2, 1)
    prechecked = node.ingest.precheck([_tampered_payload(other), good[2]])
    again = await node.receive(prechecked, source="peer")
    assert (again.stored, again.rejected) == (1, 1)
    assert set(report.stored_ids + again.stored_ids) == {e.id for e in good}
    assert await head_of(node, foreign) == (3, good[2].id)


@pytest.mark.asyncio
@pytest.mark.usefixtures("foreign")
async def test_rejections_are_rate_limited_per_source(node: Node, wall: Any) -> None:
    other_mesh = ForeignWriter(b"\x99" * 16)
    before = await counts(node)
    for _ in range(3):
        await node.receive([other_mesh.next()], source="hostile")
    report = await node.receive([other_mesh.next(), other_mesh.next()], source="hostile")
    assert report.rejected == 2  # 5 rejections from "hostile" so far

    rows = await events(node, "entry_rejected")
    assert [(r.detail["source"], r.detail["count"]) for r in rows] == [("hostile", 1)]

    # Another source is limited on its own.
    await node.receive([other_mesh.next()], source="other")
    rows = await events(node, "entry_rejected")
    assert [(r.detail["source"], r.detail["count"]) for r in rows] == [
        ("hostile", 1),
        ("other", 1),
    ]

    # Still inside the interval: counted, not written.
    wall.now += node.store.limiter.interval_ms - 1
    await node.receive([other_mesh.next()], source="hostile")
    assert len(await events(node, "entry_rejected")) == 2

    # Past it: one event carrying every rejection it stands for (5 suppressed + this one).
    wall.now += 1
    await node.receive([other_mesh.next()], source="hostile")
    rows = await events(node, "entry_rejected")
    assert [(r.detail["source"], r.detail["count"]) for r in rows] == [
        ("hostile", 1),
        ("other", 1),
        ("hostile", 6),
    ]
    assert await counts(node) == before


# -- 1. parked: forged signature, broken link, seq gap -------------------------------------------


@pytest.mark.asyncio
async def test_a_lone_forged_entry_waits_in_pending_and_is_not_applied(
    node: Node, foreign: ForeignWriter
) -> None:
    forged = forge(foreign.next())
    before, before_digest = await counts(node), await digest(node)

    report = await node.receive([forged], source="peer")

    assert (report.stored, report.pending, report.rejected) == (0, 1, 0)
    assert await counts(node) == before
    assert await digest(node) == before_digest
    assert await pending(node) == {forged.id}
    assert forged.id not in await stored(node)
    assert await sr_ids(node) == set()
    assert await events(node, "sr_synced") == []

    # Sending it again changes nothing either.
    again = await node.receive([forged], source="peer")
    assert (again.stored, again.pending) == (0, 0)
    assert await pending(node) == {forged.id}
    assert await counts(node) == before


@pytest.mark.asyncio
async def test_a_broken_prev_link_is_not_attached(node: Node, foreign: ForeignWriter) -> None:
    first = foreign.next()
    await node.receive([first], source="peer")
    before, before_digest = await counts(node), await digest(node)

    # A validly signed seq 2 whose prev is not the stored seq 1.
    fields = foreign.next().header.signed_part()
    fields[5] = b"\xab" * 32
    unlinked = Entry.decode(craft(foreign.key, fields), foreign.entries[-1].payload)
    report = await node.receive([unlinked], source="peer")

    assert (report.stored, report.pending) == (0, 1)
    assert await counts(node) == before
    assert await digest(node) == before_digest
    assert await head_of(node, foreign) == (1, first.id)
    assert await pending(node) == {unlinked.id}
    assert sr_of(unlinked) not in await sr_ids(node)


@pytest.mark.asyncio
async def test_a_broken_link_inside_a_batch_stops_the_run_there(
    node: Node, foreign: ForeignWriter
) -> None:
    e1 = foreign.next()
    fields = foreign.next().header.signed_part()
    fields[5] = b"\xab" * 32
    e2 = replace_last(
        foreign, Entry.decode(craft(foreign.key, fields), foreign.entries[-1].payload)
    )
    e3 = foreign.next()  # links to the unlinked e2, validly signed

    report = await node.receive([e1, e2, e3], source="peer")

    assert report.stored_ids == [e1.id]
    assert await pending(node) == {e2.id, e3.id}
    assert await head_of(node, foreign) == (1, e1.id)
    assert await sr_ids(node) == {sr_of(e1)}


@pytest.mark.asyncio
async def test_a_seq_gap_waits_and_is_applied_in_order_when_filled_later(
    node: Node, foreign: ForeignWriter
) -> None:
    e1, e2, e3, e4 = foreign.run(4)
    await node.receive([e1], source="peer")
    before = await counts(node)

    gap = await node.receive([e4, e3], source="peer")
    assert (gap.stored, gap.pending) == (0, 2)
    assert await counts(node) == before
    assert await pending(node) == {e3.id, e4.id}
    assert await sr_ids(node) == {sr_of(e1)}

    filled = await node.receive([e2], source="peer")
    assert filled.stored_ids == [e2.id, e3.id, e4.id]
    assert await pending(node) == set()
    assert await head_of(node, foreign) == (4, e4.id)
    reader = node.reader()
    (log,) = [g for g in await reader.select_logs() if g.writer == foreign.key.public]
    rows = await reader.select_entries(log.log_id)
    assert [r.seq for r in rows] == [1, 2, 3, 4]
    assert [r.pos for r in rows] == sorted(r.pos for r in rows)  # appended in seq order
    assert all(r.applied for r in rows)
    assert await sr_ids(node) == {sr_of(e) for e in (e1, e2, e3, e4)}


@pytest.mark.asyncio
async def test_a_seq_gap_filled_in_the_same_receive_is_applied_in_order(
    node: Node, foreign: ForeignWriter
) -> None:
    entries = foreign.run(5)
    shuffled = [entries[i] for i in (3, 0, 4, 2, 1)]
    report = await node.receive(shuffled, source="peer")
    assert report.stored_ids == [e.id for e in entries]
    assert report.pending == 0
    assert await pending(node) == set()
    synced = await events(node, "sr_synced")
    assert [r.entry for r in synced] == [e.id for e in entries]


# -- 2. unknown kinds ----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_unknown_kind_is_stored_but_not_applied(
    node: Node, foreign: ForeignWriter
) -> None:
    future = foreign.next("x.future", raw_payload=encode_canonical({"anything": [1, b"2"], "n": 3}))
    before = await counts(node)

    report = await node.receive([future], source="peer")

    assert report.stored_ids == [future.id]
    assert (await stored(node))[future.id] == (1, False, True)
    after = await counts(node)
    assert (after["headers"], after["payloads"]) == (before["headers"] + 1, before["payloads"] + 1)
    for view in ("srs", "episodes", "episode_entries"):
        assert after[view] == before[view]
    assert [r.entry for r in await events(node, "sr_synced")] == [future.id]

    # The log does not stall behind it: the next known entry is applied.
    known = foreign.next()
    assert (await node.receive([known], source="peer")).stored_ids == [known.id]
    assert (await stored(node))[known.id] == (2, True, True)
    assert await sr_ids(node) == {sr_of(known)}


# -- 3. the authenticity rule --------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_bad_signature_vouched_for_in_the_same_batch_is_stored(
    node: Node, foreign: ForeignWriter
) -> None:
    forged = replace_last(foreign, forge(foreign.next()))
    follower = foreign.next()

    report = await node.receive([forged, follower], source="peer")

    assert report.stored_ids == [forged.id, follower.id]
    assert await head_of(node, foreign) == (2, follower.id)
    assert (await stored(node))[forged.id] == (1, True, True)
    assert await pending(node) == set()
    assert await sr_ids(node) == {sr_of(forged), sr_of(follower)}


@pytest.mark.asyncio
async def test_a_bad_signature_vouched_for_by_a_later_receive_is_stored(
    node: Node, foreign: ForeignWriter
) -> None:
    forged = replace_last(foreign, forge(foreign.next()))
    follower = foreign.next()
    before = await counts(node)

    alone = await node.receive([forged], source="peer")
    assert (alone.stored, alone.pending) == (0, 1)
    assert await counts(node) == before

    later = await node.receive([follower], source="peer")
    assert later.stored_ids == [forged.id, follower.id]
    assert await pending(node) == set()
    assert [r.entry for r in await events(node, "sr_synced")] == [forged.id, follower.id]


@pytest.mark.asyncio
async def test_nothing_after_the_last_verifying_signature_is_stored(
    node: Node, foreign: ForeignWriter
) -> None:
    e1, e2 = foreign.run(2)
    bad_tail = replace_last(foreign, forge(foreign.next()))
    report = await node.receive([e1, e2, bad_tail], source="peer")
    assert report.stored_ids == [e1.id, e2.id]
    assert await pending(node) == {bad_tail.id}
    assert await head_of(node, foreign) == (2, e2.id)


@pytest.mark.asyncio
async def test_a_forged_copy_beside_the_genuine_entry_does_not_hold_it_back(
    node: Node, foreign: ForeignWriter
) -> None:
    """The genuine entry is authentic alone, so it is authentic in any company (docs/entries.md
    §The authenticity rule: the same verdict alone or in a run); the forged copy must not stall
    the log."""
    e1, e2, e3 = foreign.run(3)
    forged = forge(e1)

    first = await node.receive([forged, e1], source="peer")
    assert first.stored_ids == [e1.id]
    assert forged.id not in await stored(node)

    rest = await node.receive([e2, e3], source="peer")
    assert rest.stored_ids == [e2.id, e3.id]
    assert await head_of(node, foreign) == (3, e3.id)


@pytest.mark.asyncio
async def test_a_forged_copy_in_pending_does_not_hold_back_the_log(
    node: Node, foreign: ForeignWriter
) -> None:
    e1, e2, e3, e4 = foreign.run(4)
    await node.receive([e1], source="peer")
    # Forged copies of e2 (same prev) and of e3 wait, then the genuine run arrives in pieces.
    forged2, forged3 = forge(e2), forge(e3)
    await node.receive([forged2, forged3], source="peer")
    assert await pending(node) == {forged2.id, forged3.id}

    gap = await node.receive([e3, e4], source="peer")
    assert gap.stored == 0
    filled = await node.receive([e2], source="peer")
    assert filled.stored_ids == [e2.id, e3.id, e4.id]
    assert await head_of(node, foreign) == (4, e4.id)
    assert forged2.id not in await stored(node)
    assert await pending(node) == set()  # the stale copies are dropped once passed


@st.composite
def deliveries(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 10))
    bad = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    decoys = draw(st.lists(st.integers(0, n - 1), max_size=4, unique=True))
    order = draw(st.permutations(range(n + len(decoys))))
    cuts = draw(st.lists(st.integers(1, max(1, n + len(decoys) - 1)), max_size=3, unique=True))
    return {
        "bad": bad,
        "decoys": decoys,
        "order": order,
        "cuts": sorted(cuts),
        "amortised": draw(st.booleans()),
    }


async def _deliver(path: Path, plan: dict[str, Any]) -> None:
    wall = lambda: 1_790_000_000_000  # noqa: E731
    await Node.init(path, wall=wall)
    options = StoreOptions(synchronous="OFF", amortised_verification=plan["amortised"])
    async with Node.open(path, wall=wall, options=options) as node:
        foreign = ForeignWriter(node.info.mesh)
        await admit(node, foreign)
        for own_sig_bad in plan["bad"]:
            entry = foreign.next()
            if own_sig_bad:
                replace_last(foreign, forge(entry))
        chain = list(foreign.entries)
        # Forged copies flip another bit, so none of them is ever a genuine entry.
        items = chain + [forge(chain[i], byte=1) for i in plan["decoys"]]
        items = [items[i] for i in plan["order"]]
        bounds = [0, *plan["cuts"], len(items)]
        for lo, hi in itertools.pairwise(bounds):
            await node.receive(items[lo:hi], source="peer")

        verdicts = authenticate(chain)
        authentic = chain[: verdicts.count(True)]
        assert verdicts == [True] * len(authentic) + [False] * (len(chain) - len(authentic))
        assert await head_of(node, foreign) == (
            (len(authentic), authentic[-1].id) if authentic else (0, None)
        )
        kept = set(await stored(node))
        assert {e.id for e in authentic} <= kept
        assert not ({e.id for e in items} - {e.id for e in authentic}) & kept


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=deliveries())
def test_the_verdict_does_not_depend_on_order_company_or_batching(plan: dict[str, Any]) -> None:
    """Whatever the order, batching and forged company, exactly the entries the one rule
    calls authentic are stored, as a prefix of the log."""
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_deliver(Path(tmp) / "n", plan))


@pytest_asyncio.fixture
async def twin_dirs(tmp_path: Path, wall: Any) -> tuple[Path, Path]:
    """Two data directories of one node (same mesh, same state, the ``ForeignWriter`` key
    admitted): a clone."""
    await Node.init(tmp_path / "a", wall=wall)
    async with Node.open(tmp_path / "a", wall=wall) as node:
        await admit(node, ForeignWriter(node.info.mesh))
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    return tmp_path / "a", tmp_path / "b"


@pytest.mark.asyncio
async def test_a_run_of_1000_in_one_receive_equals_one_by_one(
    twin_dirs: tuple[Path, Path], wall: Any
) -> None:
    dir_a, dir_b = twin_dirs
    async with (
        Node.open(dir_a, wall=wall) as a,
        Node.open(dir_b, wall=wall, options=StoreOptions(amortised_verification=False)) as b,
    ):
        assert await digest(a) == await digest(b)
        foreign = ForeignWriter(a.info.mesh)
        entries = foreign.run(1000)

        together = await a.receive(entries, source="peer")
        assert together.stored == 1000
        assert together.stored_ids == [e.id for e in entries]
        for entry in entries:
            report = await b.receive([entry], source="peer")
            assert report.stored_ids == [entry.id]

        assert await digest(a) == await digest(b)
        assert await head_of(a, foreign) == await head_of(b, foreign) == (1000, entries[-1].id)
        assert await counts(a) == await counts(b)
        for node in (a, b):
            synced = await events(node, "sr_synced")
            assert [r.entry for r in synced] == [e.id for e in entries]
            assert {r.detail["source"] for r in synced} == {"peer"}
        assert len(await sr_ids(a)) == 1000


@pytest.mark.asyncio
async def test_receiving_the_same_entries_twice_stores_nothing_new(
    node: Node, foreign: ForeignWriter
) -> None:
    entries = foreign.run(20)
    first = await node.receive(entries, source="peer")
    assert first.stored == 20
    before, before_digest = await counts(node), await digest(node)
    synced = len(await events(node, "sr_synced"))
    assert synced == 20

    again = await node.receive(entries, source="peer")
    assert (again.stored, again.duplicate, again.filled, again.pending) == (0, 20, 0, 0)
    assert await counts(node) == before
    assert await digest(node) == before_digest
    assert len(await events(node, "sr_synced")) == synced

    # A mix of old and new stores only the new, with one event each.
    more = foreign.run(3)
    mixed = await node.receive([*entries[-5:], *more], source="peer")
    assert (mixed.stored, mixed.duplicate) == (3, 5)
    assert len(await events(node, "sr_synced")) == synced + 3


# -- 4. payload absent ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_a_header_without_its_payload_is_stored_then_filled_and_applied(
    node: Node, foreign: ForeignWriter
) -> None:
    entry = foreign.next()
    before = await counts(node)

    bare = await node.receive([(entry.raw, None)], source="peer")
    assert bare.stored_ids == [entry.id]
    assert (await stored(node))[entry.id] == (1, False, False)
    mid = await counts(node)
    assert (mid["headers"], mid["payloads"]) == (before["headers"] + 1, before["payloads"])
    assert mid["srs"] == before["srs"]
    assert await sr_ids(node) == set()

    again_bare = await node.receive([entry.without_payload()], source="peer")
    assert (again_bare.duplicate, again_bare.filled) == (1, 0)
    assert await counts(node) == mid

    filled = await node.receive([(entry.raw, entry.payload)], source="peer")
    assert (filled.stored, filled.duplicate, filled.filled) == (0, 1, 1)
    assert (await stored(node))[entry.id] == (1, True, True)
    assert await sr_ids(node) == {sr_of(entry)}
    assert len(await events(node, "sr_synced")) == 1

    # Filling twice is a plain duplicate.
    twice = await node.receive([entry], source="peer")
    assert (twice.duplicate, twice.filled) == (1, 0)
    assert (await counts(node))["payloads"] == before["payloads"] + 1


@pytest.mark.asyncio
async def test_a_payload_that_fails_its_schema_does_not_fill_a_bare_header(
    node: Node, foreign: ForeignWriter
) -> None:
    entry = foreign.next(raw_payload=encode_canonical(_GOOD_SR | {"sr_id": "bad"}))
    await node.receive([(entry.raw, None)], source="peer")
    before = await counts(node)
    report = await node.receive([entry], source="peer")
    assert (report.rejected, report.filled) == (1, 0)
    assert await counts(node) == before
    assert (await stored(node))[entry.id] == (1, False, False)
    assert len(await events(node, "entry_rejected")) == 1


# -- the pending area is bounded -----------------------------------------------------------------


@pytest.mark.asyncio
async def test_the_pending_area_is_bounded_and_full_means_rejected(
    node_dir: Path, wall: Any
) -> None:
    async with Node.open(node_dir, wall=wall, options=StoreOptions(pending_limit=2)) as node:
        foreign = ForeignWriter(node.info.mesh)
        await admit(node, foreign)
        e1, e2, e3, e4 = foreign.run(4)
        parked = await node.receive([e2, e3], source="peer")
        assert parked.pending == 2
        before = await counts(node)

        full = await node.receive([e4], source="peer")
        assert (full.pending, full.rejected) == (0, 1)
        assert await pending(node) == {e2.id, e3.id}
        assert await counts(node) == before
        (row,) = await events(node, "entry_rejected")
        assert row.detail["reason"] == "the pending area is full"
        assert row.entry == e4.id

        # Once the gap fills the area drains, and a new arrival may wait again.
        assert (await node.receive([e1], source="peer")).stored_ids == [e1.id, e2.id, e3.id]
        assert await pending(node) == set()
        e5, e6 = foreign.run(2)
        assert (await node.receive([e6], source="peer")).pending == 1
        assert (await node.receive([e4, e5], source="peer")).stored_ids == [e4.id, e5.id, e6.id]


@pytest.mark.asyncio
async def test_resending_a_waiting_entry_does_not_use_up_the_pending_area(
    node_dir: Path, wall: Any
) -> None:
    async with Node.open(node_dir, wall=wall, options=StoreOptions(pending_limit=2)) as node:
        foreign = ForeignWriter(node.info.mesh)
        await admit(node, foreign)
        e1, e2, e3 = foreign.run(3)
        for _ in range(3):  # a peer retrying the same out-of-order entry
            await node.receive([e3], source="peer")
        assert await pending(node) == {e3.id}

        report = await node.receive([e2], source="other")
        assert (report.pending, report.rejected) == (1, 0)
        assert await pending(node) == {e2.id, e3.id}
        assert await events(node, "entry_rejected") == []
        assert (await node.receive([e1], source="peer")).stored_ids == [e1.id, e2.id, e3.id]
