"""Bundles a node refuses (docs/bundles.md §What an import guarantees): a flipped byte anywhere, a
truncated file, a wrong signature, a bundle of another mesh, a forged entry inside a validly signed
bundle, an exporter that is not a member, a file changed between verifying and applying.  Each is
refused with ``BundleError`` and a clear message, and the importer's store is byte-for-byte what it
was: row counts, the log's digest, the audit feed."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.identity import AUTHORITY_KEY_FILE
from node.node import Node
from node.transfer.bundles import BundleError
from protocol.bundle import BundleHeader, BundleReader, BundleWriter
from protocol.clock import Hlc
from protocol.entry import Entry, Header, payload_digest
from protocol.frontier import Frontier
from protocol.signing import SigningKey, seal
from tests.node.bundlekit import caller, snapshot, write
from tests.node.helpers import ForeignWriter, Wall, events
from tests.node.synckit import make_mesh

pytestmark = pytest.mark.asyncio


async def pair(tmp_path: Path, wall: Wall) -> dict[str, Path]:
    writer = ForeignWriter(b"")
    dirs = await make_mesh(tmp_path, ["A", "B"], wall, [writer])
    async with Node.open(dirs["A"], wall=wall) as a:
        await write(a, await caller(a), "one", "two", "three")
        await a.receive(writer.run(6), source="test")
        await a.export_bundle(tmp_path / "good.bundle")
    return dirs


async def refused(node: Node, path: Path, match: str) -> None:
    before = await snapshot(node)
    with pytest.raises(BundleError, match=match):
        await node.import_bundle(path)
    assert await snapshot(node) == before


def entries_of(path: Path) -> list[Entry]:
    reader = BundleReader()
    reader.feed(path.read_bytes())
    out = []
    while (event := reader.next_event()) is not None:
        if isinstance(event, Entry):
            out.append(event)
    return out


def signed(key: SigningKey, mesh: bytes, entries: list[Entry], out: Path) -> Path:
    writer = BundleWriter(key, BundleHeader(mesh, key.public, 1, Frontier()))
    out.write_bytes(writer.start() + b"".join(map(writer.entry, entries)) + writer.finish())
    return out


async def test_a_flipped_byte_anywhere_is_refused_and_nothing_stored(
    tmp_path: Path, wall: Wall
) -> None:
    dirs = await pair(tmp_path, wall)
    good = (tmp_path / "good.bundle").read_bytes()
    bad = tmp_path / "bad.bundle"
    async with Node.open(dirs["B"], wall=wall) as b:
        for i in sorted(
            {
                0,
                9,
                20,
                len(good) // 3,
                len(good) // 2,
                len(good) - 70,
                len(good) - 1,
                *range(13, len(good), 97),
            }
        ):
            flipped = bytearray(good)
            flipped[i] ^= 0x01
            bad.write_bytes(bytes(flipped))
            await refused(b, bad, "is refused")
        await b.import_bundle(tmp_path / "good.bundle")  # the good one still goes in


async def test_a_truncated_bundle_is_refused(tmp_path: Path, wall: Wall) -> None:
    dirs = await pair(tmp_path, wall)
    good = (tmp_path / "good.bundle").read_bytes()
    bad = tmp_path / "short.bundle"
    async with Node.open(dirs["B"], wall=wall) as b:
        for n in (0, 5, 30, len(good) // 2, len(good) - 1):
            bad.write_bytes(good[:n])
            await refused(b, bad, "ends early|is refused")
        bad.write_bytes(good[: len(good) - 1])
        await refused(b, bad, r"ends early \(truncated\)")


async def test_a_wrong_signature_is_refused(tmp_path: Path, wall: Wall) -> None:
    dirs = await pair(tmp_path, wall)
    good = (tmp_path / "good.bundle").read_bytes()
    other = SigningKey(b"\x0e" * 32).sign(b"x")
    bad = tmp_path / "bad.bundle"
    bad.write_bytes(good[:-64] + other)
    async with Node.open(dirs["B"], wall=wall) as b:
        await refused(b, bad, "the exporter's signature does not verify")


async def test_a_bundle_of_another_mesh_is_refused(tmp_path: Path, wall: Wall) -> None:
    dirs = await pair(tmp_path, wall)
    await Node.init(tmp_path / "X", wall=wall)
    async with Node.open(tmp_path / "X", wall=wall) as x:
        await write(x, await caller(x), "elsewhere")
        await x.export_bundle(tmp_path / "x.bundle")
    async with Node.open(dirs["B"], wall=wall) as b:
        await refused(b, tmp_path / "x.bundle", "a bundle of another mesh")


async def test_a_forged_entry_inside_a_validly_signed_bundle_is_refused(
    tmp_path: Path, wall: Wall
) -> None:
    dirs = await pair(tmp_path, wall)
    entries = entries_of(tmp_path / "good.bundle")
    at = next(i for i, e in enumerate(entries) if e.header.seq == 3 and e.header.kind == "sr.put")
    victim, payload = entries[at].header, (entries[at].payload or b"").replace(b"team", b"tean")
    assert payload != entries[at].payload
    forged = Header(
        victim.v,
        victim.mesh,
        victim.writer,
        victim.epoch,
        victim.seq,
        victim.prev,
        victim.hlc,
        victim.kind,
        payload_digest(payload),
        len(payload),
        victim.sig,
    )
    entries[at] = Entry.of(forged, payload)
    async with Node.open(dirs["A"], wall=wall) as a:
        key, mesh = a.key, a.info.mesh
    path = signed(key, mesh, entries, tmp_path / "forged.bundle")
    async with Node.open(dirs["B"], wall=wall) as b:
        await refused(b, path, "is not authentic")


async def test_an_exporter_that_is_not_a_member_is_refused(tmp_path: Path, wall: Wall) -> None:
    dirs = await pair(tmp_path, wall)
    entries = entries_of(tmp_path / "good.bundle")
    async with Node.open(dirs["B"], wall=wall) as b:
        path = signed(SigningKey(b"\x0d" * 32), b.info.mesh, entries, tmp_path / "x.bundle")
        await refused(b, path, "is not a member of this mesh")


async def test_not_a_bundle_and_a_missing_file_are_refused(tmp_path: Path, wall: Wall) -> None:
    dirs = await pair(tmp_path, wall)
    (tmp_path / "text.bundle").write_text("hello")
    async with Node.open(dirs["B"], wall=wall) as b:
        await refused(b, tmp_path / "text.bundle", "not a memlane bundle")
        await refused(b, tmp_path / "missing.bundle", "cannot read")
        with pytest.raises(BundleError, match="not a usable frontier file"):
            await b.export_bundle(tmp_path / "out.bundle", since=tmp_path / "text.bundle")


async def test_a_file_changed_between_verifying_and_applying_stores_nothing(
    tmp_path: Path, wall: Wall
) -> None:
    dirs = await pair(tmp_path, wall)
    path = tmp_path / "good.bundle"
    async with Node.open(dirs["A"], wall=wall) as a:
        await write(a, await caller(a), "four")
        await a.export_bundle(tmp_path / "newer.bundle")
    async with Node.open(dirs["B"], wall=wall) as b:

        def swap_once_verified(phase: str, done: int, total: int) -> None:
            if phase == "verify" and done == total:  # the first pass has read it all
                swapped = tmp_path / "swapped.bundle"
                swapped.write_bytes((tmp_path / "newer.bundle").read_bytes())
                swapped.replace(path)  # a new file at the path; the open one reads on

        before = await snapshot(b)
        with pytest.raises(BundleError, match="changed while it was being imported"):
            await b.import_bundle(path, progress=swap_once_verified)
        assert await snapshot(b) == before


async def test_an_entry_the_receive_path_refuses_is_counted_not_stored(
    tmp_path: Path, wall: Wall
) -> None:
    dirs = await pair(tmp_path, wall)
    entries = entries_of(tmp_path / "good.bundle")
    async with Node.open(dirs["A"], wall=wall) as a:
        key, mesh, authority = a.key, a.info.mesh, a.membership.authority_key
    seed = (dirs["A"] / AUTHORITY_KEY_FILE).read_bytes()
    head = [e for e in entries if e.header.writer == authority][-1]
    bad = seal(
        SigningKey(seed),
        mesh=mesh,
        epoch=head.header.epoch,
        seq=head.header.seq + 1,
        prev=head.id,
        hlc=Hlc(wall(), 0),
        kind="member.add",
        payload=b"\x80",
    )
    at = entries.index(head) + 1
    path = signed(key, mesh, [*entries[:at], bad, *entries[at:]], tmp_path / "odd.bundle")
    async with Node.open(dirs["B"], wall=wall) as b:
        report = await b.import_bundle(path)
        assert report.rejected == 1
        assert report.new + report.already_present == len(entries)
        assert bad.id not in {e.id for e in await b.entries()}
        (rejected,) = await events(b, "entry_rejected")
        assert rejected.detail["source"] == f"bundle:{report.bundle_id}"


async def test_export_refuses_to_overwrite_a_file(tmp_path: Path, wall: Wall) -> None:
    dirs = await pair(tmp_path, wall)
    async with Node.open(dirs["A"], wall=wall) as a:
        with pytest.raises(BundleError, match="already exists"):
            await a.export_bundle(tmp_path / "good.bundle")
        with pytest.raises(BundleError, match="workspace: must be a workspace name"):
            await a.export_bundle(tmp_path / "other.bundle", workspace="")
        assert not (tmp_path / "other.bundle").exists()
