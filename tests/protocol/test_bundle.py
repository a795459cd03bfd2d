"""The bundle format (protocol.bundle, docs/bundles.md): a round trip fed whole, byte by byte
and with trailing data; every flipped byte and every truncation refused; forged, reordered and
foreign entries refused inside a validly signed bundle; arbitrary bytes decode or raise
``RemoteProtocolError``, nothing else; frontier files."""

from __future__ import annotations

import contextlib
import dataclasses

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.bundle import (
    MAGIC,
    BundleEnd,
    BundleEvent,
    BundleHeader,
    BundleReader,
    BundleWriter,
    FrontierFile,
    decode_frontier_file,
    encode_frontier_file,
)
from protocol.canonical import encode_canonical
from protocol.clock import Hlc
from protocol.entry import Entry, Header, payload_digest
from protocol.errors import LocalProtocolError, RemoteProtocolError
from protocol.frames import encode_frame
from protocol.frontier import MAX_FRONTIER_LOGS, Frontier, Tip
from protocol.signing import SigningKey, seal

MESH = b"\x11" * 16
EXPORTER = SigningKey(b"\x01" * 32)


def log(seed: int, n: int, *, mesh: bytes = MESH, epoch: bytes = b"\x05" * 8) -> list[Entry]:
    key, out = SigningKey(bytes([seed]) * 32), []
    for seq in range(1, n + 1):
        prev = out[-1].id if out else None
        out.append(
            seal(
                key,
                mesh=mesh,
                epoch=epoch,
                seq=seq,
                prev=prev,
                hlc=Hlc(1000 + seq, 0),
                kind="test.note",
                payload=b"payload %d" % seq,
            )
        )
    return out


def header(**changes: object) -> BundleHeader:
    tips = Frontier.of([Tip(b"\x02" * 32, b"\x05" * 8, 3, b"\x09" * 32)])
    base = BundleHeader(MESH, EXPORTER.public, 1_790_000_000_000, tips, None, "team")
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def bundle(
    entries: list[Entry], key: SigningKey = EXPORTER, head: BundleHeader | None = None
) -> bytes:
    writer = BundleWriter(key, head or header(exporter=key.public))
    return writer.start() + b"".join(writer.entry(e) for e in entries) + writer.finish()


def read(data: bytes, chunk: int | None = None) -> list[BundleEvent]:
    reader, events = BundleReader(), []
    step = chunk or max(len(data), 1)
    for i in range(0, len(data), step):
        reader.feed(data[i : i + step])
        while (event := reader.next_event()) is not None:
            events.append(event)
    reader.end_of_input()
    return events


ENTRIES = log(2, 3) + log(3, 2)
DATA = bundle(ENTRIES)


def test_a_bundle_reads_back_whole_and_byte_by_byte() -> None:
    for chunk in (None, 1, 7):
        head, *entries, end = read(DATA, chunk)
        assert head == header()
        assert entries == ENTRIES
        assert isinstance(end, BundleEnd)
        assert end.count == 5
        assert len(end.bundle_id) == 32
    assert DATA.startswith(MAGIC)


def test_an_empty_bundle_and_payloads_left_out_are_fine() -> None:
    assert len(read(bundle([]))) == 2
    withheld = [e.without_payload() for e in ENTRIES]
    assert read(bundle(withheld))[1:-1] == withheld


def test_trailing_bytes_are_refused() -> None:
    for extra in (b"\x00", b"\x00\x00\x00\x05hello", DATA):
        with pytest.raises(RemoteProtocolError, match="trail"):
            read(DATA + extra)


def test_every_flipped_byte_is_refused() -> None:
    for i in range(len(DATA)):
        flipped = bytearray(DATA)
        flipped[i] ^= 0x40
        with pytest.raises(RemoteProtocolError):
            read(bytes(flipped))


def test_every_truncation_is_refused() -> None:
    for n in range(len(DATA)):
        with pytest.raises(RemoteProtocolError):
            read(DATA[:n])


def last_frame(data: bytes) -> int:
    """Where the bundle's last frame begins."""
    at = len(MAGIC)
    while True:
        length = int.from_bytes(data[at : at + 4], "big")
        if at + 4 + length == len(data):
            return at
        at += 4 + length


def test_a_signature_by_another_key_is_refused() -> None:
    at = last_frame(DATA)
    tag, count, digest, sig = msgpack.unpackb(DATA[at + 4 :])
    impostor = SigningKey(b"\x0e" * 32).sign(b"the same length, another signer")
    body = encode_canonical([tag, count, digest, impostor])
    with pytest.raises(RemoteProtocolError, match="signature does not verify"):
        read(DATA[:at] + encode_frame(body))
    with pytest.raises(RemoteProtocolError, match="digest"):
        read(DATA[:at] + encode_frame(encode_canonical([tag, count, b"\x00" * 32, sig])))


def test_writer_refuses_to_sign_for_another_exporter() -> None:
    with pytest.raises(LocalProtocolError):
        BundleWriter(SigningKey(b"\x0e" * 32), header())


def forge(entry: Entry, payload: bytes) -> Entry:
    """The entry with another payload and the header changed to match it, signature kept."""
    h = entry.header
    changed = Header(
        h.v,
        h.mesh,
        h.writer,
        h.epoch,
        h.seq,
        h.prev,
        h.hlc,
        h.kind,
        payload_digest(payload),
        len(payload),
        h.sig,
    )
    return Entry.of(changed, payload)


@pytest.mark.parametrize("where", [0, 1, 2])
def test_a_forged_entry_in_a_validly_signed_bundle_is_refused(where: int) -> None:
    entries = log(2, 3)
    entries[where] = forge(entries[where], b"something else")
    with pytest.raises(RemoteProtocolError, match="not authentic"):
        read(bundle(entries))


def test_an_entry_of_another_mesh_is_refused() -> None:
    with pytest.raises(RemoteProtocolError, match="another mesh"):
        read(bundle(log(2, 2, mesh=b"\x22" * 16)))


def test_a_log_out_of_order_or_split_is_refused() -> None:
    a, b = log(2, 3), log(3, 1)
    with pytest.raises(RemoteProtocolError, match="seq"):
        read(bundle([a[1], a[0]]))
    with pytest.raises(RemoteProtocolError, match="together"):
        read(bundle([a[0], b[0], a[1]]))


def test_a_gap_in_a_log_needs_each_run_signed() -> None:
    entries = log(2, 4)
    assert read(bundle([entries[0], entries[2], entries[3]]))[1:-1] == [entries[0], *entries[2:]]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(1, 50))
def test_arbitrary_bytes_decode_or_raise_remote_protocol_error(data: bytes, chunk: int) -> None:
    for blob in (data, MAGIC + data, DATA[: len(DATA) // 2] + data):
        with contextlib.suppress(RemoteProtocolError):
            read(blob, chunk)


def test_a_failed_reader_refuses_further_use() -> None:
    reader = BundleReader()
    reader.feed(b"not a bundle at all")
    with pytest.raises(RemoteProtocolError, match="not a memlane bundle"):
        reader.next_event()
    with pytest.raises(LocalProtocolError):
        reader.feed(b"more")


def test_a_frontier_file_round_trips_and_refuses_garbage() -> None:
    file = FrontierFile(MESH, EXPORTER.public, header().frontier)
    assert decode_frontier_file(encode_frontier_file(file)) == file
    for bad in (
        b"",
        b"garbage",
        encode_frontier_file(file)[:-1],
        encode_frontier_file(file) + b"x",
    ):
        with pytest.raises(RemoteProtocolError):
            decode_frontier_file(bad)


def test_frontiers_of_more_logs_than_a_frontier_message_travel_in_bundles() -> None:
    """A bundle cut from a node of 10,001 logs, and its frontier file, read back whole (the
    export raised "tips: must be a tuple of 0 to 10000 items" before)."""
    tips = Frontier(
        tuple(
            Tip(i.to_bytes(32), b"\x05" * 8, 1, b"\x09" * 32) for i in range(MAX_FRONTIER_LOGS + 1)
        )
    )
    head = header(frontier=tips, since=tips)
    (got, end) = read(bundle([], head=head))
    assert got == head
    assert isinstance(end, BundleEnd)
    file = FrontierFile(MESH, EXPORTER.public, tips)
    assert decode_frontier_file(encode_frontier_file(file)) == file


def test_a_header_of_empty_arrays_is_refused_before_it_is_unpacked() -> None:
    doc = [1, {"frontier": [[]] * 2_000_000}]  # 2 MB that would be two million lists
    with pytest.raises(RemoteProtocolError, match="more than"):
        read(MAGIC + encode_frame(encode_canonical(doc)))


def test_header_fields_are_checked_when_built() -> None:
    with pytest.raises(LocalProtocolError, match="mesh"):
        header(mesh=b"short")
    with pytest.raises(LocalProtocolError, match="workspace"):
        header(workspace="")
