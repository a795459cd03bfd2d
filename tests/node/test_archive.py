"""Backing a node up and restoring it (docs/operations.md §Backups): an archive is
made while the node runs; the restored node starts a new random epoch linked to the last head
it holds, so it never forks against peers that saw the entries written after the archive, and
catches up from them over real sync; the restore writes no audit event, changes the feed id
and revokes the tokens it brought back unless told to keep them; a wrong passphrase or an
altered archive restores nothing."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import msgpack
import pytest

from node.errors import Unauthenticated
from node.node import Node
from node.transfer.archive import (
    ArchiveError,
    Kdf,
    WrongPassphrase,
    create_archive,
    restore_archive,
)
from node.transfer.archive import secrets as sealing
from tests.node.bundlekit import answers, caller, deeper, manifest_of, nested, rewritten, write
from tests.node.helpers import Wall, admit, events
from tests.node.synckit import converged, held, make_mesh, own_ids, syncing

pytestmark = pytest.mark.asyncio

SECRET = b"correct horse battery staple"
FAST_KDF = Kdf(log_n=12)
MEMLANE = Path(sys.executable).parent / "memlane"


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


async def audit_rows(node: Node) -> list[tuple[int, str]]:
    reader = node.reader()
    return [(r.seq, r.event) for r in await reader.select_audit(limit=100_000)]


async def test_a_restored_node_starts_a_new_epoch_and_catches_up_without_a_fork(
    tmp_path: Path, wall: Wall
) -> None:
    dirs = await make_mesh(tmp_path, ["A", "B"], wall)
    async with Node.open(dirs["A"], wall=wall) as a, Node.open(dirs["B"], wall=wall) as b:
        on_a = await caller(a)
        await write(a, on_a, "before one", "before two")
        async with syncing(a) as sa, syncing(b) as sb:
            sb.dial(*await sa.listen())
            await converged([a, b], [sa, sb])
            archived = await a.create_archive(tmp_path / "a.archive", SECRET)
            await write(a, on_a, "lost one", "lost two")  # after the archive: B sees them
            await converged([a, b], [sa, sb])
        lost = await own_ids(a)
        old_epoch, old_feed, old_audit = a.info.epoch, a.info.feed_id, await audit_rows(a)
    assert archived.tokens == 1

    restored = await Node.restore_archive(
        tmp_path / "a.archive", tmp_path / "A2", SECRET, wall=wall
    )
    async with Node.open(tmp_path / "A2", wall=wall) as a2, Node.open(dirs["B"], wall=wall) as b:
        assert a2.info.epoch != old_epoch
        assert a2.info.epoch.hex() == restored.epoch
        assert a2.info.feed_id != old_feed
        assert a2.info.feed_id == restored.feed_id
        assert await audit_rows(a2) == old_audit[: len(await audit_rows(a2))]  # none added
        assert not lost <= await own_ids(a2)  # the two lost entries are not in the archive
        assert (await a2.verify()).ok
        await write(a2, await caller(a2), "after the restore")
        (first,) = [e for e in await a2.entries() if e.header.epoch == a2.info.epoch]
        assert first.header.seq == 1
        old_head = max(
            (e for e in await a2.entries() if e.header.epoch == old_epoch),
            key=lambda e: e.header.seq,
        )
        assert first.header.prev == old_head.id  # linked to the last head it held
        authority = a2.membership.authority_key
        old_heads = {e.header.epoch: e for e in await a2.entries() if e.header.writer == authority}
        await admit(a2, b"\x0c" * 32)  # the authority's log, too, goes on in a new epoch
        held_now = await a2.entries()
        (added,) = [
            e for e in held_now if e.header.writer == authority and e.header.epoch not in old_heads
        ]
        assert added.header.seq == 1
        assert added.header.prev in {e.id for e in old_heads.values()}

        async with syncing(a2) as s2, syncing(b) as sb:
            sb.dial(*await s2.listen())
            await converged([a2, b], [s2, sb])
        assert lost <= await own_ids(a2)  # caught up from the peer
        assert await held(a2) == await held(b)
        assert await events(b, "fork_detected") == []
        assert await events(a2, "fork_detected") == []
        assert await answers(a2, await caller(a2)) == await answers(b, await caller(b))
        assert (await a2.verify()).ok
        assert (await b.verify()).ok


async def test_restored_tokens_are_revoked_unless_kept(tmp_path: Path, wall: Wall) -> None:
    await Node.init(tmp_path / "A", wall=wall)
    async with Node.open(tmp_path / "A", wall=wall) as a:
        issued = await a.create_token("alice", "team", ("read:workspace",))
        await a.create_archive(tmp_path / "a.archive", SECRET)
    await Node.restore_archive(tmp_path / "a.archive", tmp_path / "revoked", SECRET, wall=wall)
    report = await Node.restore_archive(
        tmp_path / "a.archive", tmp_path / "kept", SECRET, keep_tokens=True, wall=wall
    )
    assert (report.tokens, report.tokens_revoked) == (1, 0)
    async with Node.open(tmp_path / "revoked", wall=wall) as revoked:
        with pytest.raises(Unauthenticated):
            await revoked.authenticate(issued.token)
        assert [t.revoked for t in await revoked.list_tokens()] == [wall()]
    async with Node.open(tmp_path / "kept", wall=wall) as kept:
        assert (await kept.authenticate(issued.token)).principal == "alice"


async def test_the_archive_holds_no_secret_in_clear(tmp_path: Path, wall: Wall) -> None:
    await Node.init(tmp_path / "A", wall=wall)
    async with Node.open(tmp_path / "A", wall=wall) as a:
        issued = await a.create_token("alice", "team", ("read:workspace",))
        await create_archive(a.path, tmp_path / "a.archive", SECRET, now=wall(), kdf=FAST_KDF)
    plain = gzip.decompress((tmp_path / "a.archive").read_bytes())
    token_hash = hashlib.sha256(issued.token.encode()).digest()
    assert token_hash not in plain
    assert (tmp_path / "A" / "node.key").read_bytes() not in plain
    assert (tmp_path / "A" / "authority.key").read_bytes() not in plain
    with tarfile.open(tmp_path / "a.archive") as tar:
        assert sorted(tar.getnames()) == ["manifest.json", "memlane.db", "secrets.enc"]


async def test_a_wrong_passphrase_restores_nothing(tmp_path: Path, wall: Wall) -> None:
    await Node.init(tmp_path / "A", wall=wall)
    await create_archive(tmp_path / "A", tmp_path / "a.archive", SECRET, now=wall(), kdf=FAST_KDF)
    with pytest.raises(WrongPassphrase, match="passphrase does not open this archive"):
        await restore_archive(tmp_path / "a.archive", tmp_path / "B", b"wrong", now=wall())
    assert not (tmp_path / "B").exists()
    assert names(tmp_path) == ["A", "a.archive"]


async def test_an_altered_archive_restores_nothing(tmp_path: Path, wall: Wall) -> None:
    await Node.init(tmp_path / "A", wall=wall)
    archive = tmp_path / "a.archive"
    await create_archive(tmp_path / "A", archive, SECRET, now=wall(), kdf=FAST_KDF)
    with tarfile.open(archive) as tar:
        f = tar.extractfile("manifest.json")
        assert f is not None
        manifest = json.load(f)
    cases = {
        "db": (
            rewritten(archive, tmp_path / "db.archive", {"memlane.db": b"not a database"}),
            "does not match its checksum",
        ),
        "manifest": (
            rewritten(
                archive,
                tmp_path / "m.archive",
                {"manifest.json": json.dumps(manifest | {"created": 1}).encode()},
            ),
            "passphrase does not open this archive",
        ),
        "kdf": (
            rewritten(
                archive,
                tmp_path / "k.archive",
                {
                    "manifest.json": json.dumps(
                        manifest | {"kdf": manifest["kdf"] | {"log_n": 40}}
                    ).encode()
                },
            ),
            "key derivation is not one memlane makes",
        ),
        "truncated": (tmp_path / "t.archive", "not a readable memlane archive"),
        "garbage": (tmp_path / "g.archive", "not a readable memlane archive"),
    }
    (tmp_path / "t.archive").write_bytes(archive.read_bytes()[:-100])
    (tmp_path / "g.archive").write_bytes(b"hello")
    for name, (path, match) in cases.items():
        with pytest.raises(ArchiveError, match=match):
            await restore_archive(path, tmp_path / name, SECRET, now=wall())
        assert not (tmp_path / name).exists()
    assert not [n for n in names(tmp_path) if n.startswith(".")]  # no stage left behind


async def test_restore_refuses_a_directory_holding_something(tmp_path: Path, wall: Wall) -> None:
    await Node.init(tmp_path / "A", wall=wall)
    await create_archive(tmp_path / "A", tmp_path / "a.archive", SECRET, now=wall(), kdf=FAST_KDF)
    with pytest.raises(ArchiveError, match="is not empty"):
        await restore_archive(tmp_path / "a.archive", tmp_path / "A", SECRET, now=wall())
    with pytest.raises(ArchiveError, match="already exists"):
        await create_archive(tmp_path / "A", tmp_path / "a.archive", SECRET, now=wall())
    (tmp_path / "empty").mkdir()
    await restore_archive(tmp_path / "a.archive", tmp_path / "empty", SECRET, now=wall())
    async with Node.open(tmp_path / "empty", wall=wall) as restored:
        assert (await restored.verify()).ok


async def test_an_archive_made_while_the_node_writes_is_consistent(
    tmp_path: Path, wall: Wall
) -> None:
    await Node.init(tmp_path / "A", wall=wall)
    async with Node.open(tmp_path / "A", wall=wall) as a:
        on_a = await caller(a)
        titles = [f"note {i}" for i in range(40)]
        writing = asyncio.gather(*(write(a, on_a, t) for t in titles))
        await a.create_archive(tmp_path / "a.archive", SECRET)
        await writing
    await Node.restore_archive(tmp_path / "a.archive", tmp_path / "B", SECRET, wall=wall)
    async with Node.open(tmp_path / "B", wall=wall) as b:
        report = await b.verify()
        assert report.ok, report.problems
        assert len(await b.entries()) <= 41


async def an_archive(tmp_path: Path, wall: Wall) -> Path:
    await Node.init(tmp_path / "A", wall=wall)
    archive = tmp_path / "a.archive"
    await create_archive(tmp_path / "A", archive, SECRET, now=wall(), kdf=FAST_KDF)
    return archive


def with_manifest(archive: Path, out: Path, text: str) -> Path:
    return rewritten(archive, out, {"manifest.json": text.encode()})


async def refused_at_once(archive: Path, target: Path, wall: Wall, match: str) -> None:
    """``Node.restore_archive`` refuses ``archive`` in under a second and leaves ``target`` (an
    empty directory) empty, with no stage beside it."""
    await asyncio.to_thread(target.mkdir)
    started = time.monotonic()
    with pytest.raises(ArchiveError, match=match):
        await Node.restore_archive(archive, target, SECRET, wall=wall)
    assert time.monotonic() - started < 1
    assert names(target) == []
    assert not [n for n in names(target.parent) if n.startswith(".")]


COSTLY = {
    "huge": {"log_n": 22, "r": 16, "p": 4},  # ~8 GiB and minutes, were it derived
    "n": {"log_n": 18},
    "r": {"r": 9},
    "p": {"p": 2},
    "memory": {"log_n": 17, "r": 16},
    "text": {"log_n": "16"},
    "float": {"r": 8.0},
    "salt": {"salt": "00" * 65},
    "name": {"name": "argon2id"},
}


@pytest.mark.parametrize("cost", COSTLY.values(), ids=COSTLY.keys())
async def test_a_manifest_asking_for_a_costly_key_derivation_is_refused_at_once(
    tmp_path: Path, wall: Wall, cost: dict[str, Any]
) -> None:
    archive = await an_archive(tmp_path, wall)
    manifest = manifest_of(archive)
    crafted = with_manifest(
        archive, tmp_path / "c.archive", json.dumps(manifest | {"kdf": manifest["kdf"] | cost})
    )
    await refused_at_once(crafted, tmp_path / "B", wall, "key derivation is not one memlane makes")


async def test_an_archive_is_written_only_with_a_key_derivation_restore_accepts(
    tmp_path: Path, wall: Wall
) -> None:
    await Node.init(tmp_path / "A", wall=wall)
    with pytest.raises(ArchiveError, match="key derivation is not one memlane makes"):
        await create_archive(
            tmp_path / "A", tmp_path / "a.archive", SECRET, now=wall(), kdf=Kdf(log_n=18)
        )
    assert names(tmp_path) == ["A"]


MANIFESTS = {
    "deep": (lambda m: deeper(m, 30_000), "manifest is nested more than 8 levels deep"),
    "deep and large": (lambda m: deeper(m, 200_000), "manifest is larger than 65,536 bytes"),
    "nine levels": (
        lambda m: json.dumps(m | {"x": json.loads(nested(9))}),
        "manifest is nested more than 8 levels deep",
    ),
    "large": (lambda m: json.dumps(m | {"x": "y" * (1 << 16)}), "manifest is larger than 65,536"),
    "not utf-8": (lambda m: json.dumps(m) + "\udcff", "manifest is not JSON"),
    "listing": (
        lambda m: json.dumps(m | {"files": {"memlane.db": [1]}}),
        "manifest is malformed: a file without its checksum",
    ),
    "kdf": (lambda m: json.dumps(m | {"kdf": [1]}), "key derivation is not one memlane makes"),
}


@pytest.mark.parametrize("case", MANIFESTS.values(), ids=MANIFESTS.keys())
async def test_a_manifest_larger_deeper_or_otherwise_shaped_than_memlane_writes_is_refused(
    tmp_path: Path, wall: Wall, case: tuple[Any, str]
) -> None:
    archive = await an_archive(tmp_path, wall)
    crafted, match = case
    text: str = crafted(manifest_of(archive))
    out = rewritten(
        archive, tmp_path / "c.archive", {"manifest.json": text.encode(errors="surrogateescape")}
    )
    await refused_at_once(out, tmp_path / "B", wall, match)


@pytest.mark.parametrize(
    ("depth", "match"),
    [
        (30_000, "the archive's manifest is nested more than 8 levels deep"),
        (200_000, "the archive's manifest is larger than 65,536 bytes"),
    ],
)
async def test_the_command_refuses_a_deeply_nested_manifest_without_a_traceback(
    tmp_path: Path, wall: Wall, depth: int, match: str
) -> None:
    archive = await an_archive(tmp_path, wall)
    crafted = with_manifest(archive, tmp_path / "c.archive", deeper(manifest_of(archive), depth))
    (tmp_path / "pass").write_bytes(SECRET + b"\n")
    done = await asyncio.to_thread(
        subprocess.run,
        [
            str(MEMLANE),
            "archive",
            "restore",
            str(crafted),
            "--data",
            str(tmp_path / "B"),
            "--passphrase-file",
            str(tmp_path / "pass"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert "Traceback" not in done.stderr
    assert match in done.stderr
    assert not (tmp_path / "B").exists()
    assert not [n for n in names(tmp_path) if n.startswith(".")]


def resealed(archive: Path, out: Path, plain: bytes) -> Path:
    """The archive with other secrets sealed in it, under its own passphrase and manifest."""
    sealed = sealing.seal_secrets(plain, SECRET, manifest_of(archive))
    return rewritten(archive, out, {"secrets.enc": sealed})


SECRETS = {
    "deep": b"\x91" * 200_000 + b"\xc0",  # [[[…[nil]…]]], 200,000 deep
    "a list": msgpack.packb([1, 2]),
    "a short key": msgpack.packb({"authority_key": None, "node_key": b"key", "tokens": []}),
    "no tokens": msgpack.packb({"authority_key": None, "node_key": b"k" * 32, "tokens": 1}),
    "a short row": msgpack.packb(
        {"authority_key": None, "node_key": b"k" * 32, "tokens": [[b"h", "id"]]}
    ),
    "a row of maps": msgpack.packb(
        {
            "authority_key": None,
            "node_key": b"k" * 32,
            "tokens": [[b"h", "i", "p", "w", "s", 1, None, {}]],
        }
    ),
}


@pytest.mark.parametrize("plain", SECRETS.values(), ids=SECRETS.keys())
async def test_secrets_other_than_memlane_seals_are_refused(
    tmp_path: Path, wall: Wall, plain: bytes
) -> None:
    archive = await an_archive(tmp_path, wall)
    crafted = resealed(archive, tmp_path / "c.archive", plain)
    await refused_at_once(crafted, tmp_path / "B", wall, "the archive's secrets are malformed")


async def test_secrets_larger_than_the_limit_are_refused_unread(tmp_path: Path, wall: Wall) -> None:
    archive = await an_archive(tmp_path, wall)
    crafted = rewritten(archive, tmp_path / "c.archive", {"secrets.enc": bytes((1 << 26) + 1)})
    await refused_at_once(crafted, tmp_path / "B", wall, "secrets are larger than 67,108,864")


# -- what an archive inflates to -----------------------------------------------------------------

BOMB = 32 << 20  # bytes of zeros: 32 KiB once gzipped


def bombed(
    archive: Path,
    out: Path,
    before: list[tuple[tarfile.TarInfo, bytes]],
    change: dict[str, bytes],
    listed: dict[str, Any] | None = None,
) -> Path:
    """The archive with ``before`` members ahead of it, some members' contents replaced, and
    the manifest's listing of them changed as ``listed`` says (the tar written by hand, so a
    member may claim any header)."""
    manifest = manifest_of(archive)
    manifest["files"] |= listed or {}
    change = {"manifest.json": json.dumps(manifest).encode()} | change
    with tarfile.open(archive) as src, gzip.open(out, "wb") as raw:
        for info, data in before:
            raw.write(info.tobuf(tarfile.GNU_FORMAT) + data)
        with tarfile.open(fileobj=raw, mode="w|") as dst:
            for member in src.getmembers():
                f = src.extractfile(member)
                assert f is not None
                data = change.get(member.name, f.read())
                member.size = len(data)
                dst.addfile(member, io.BytesIO(data))
    return out


def long_name(size: int) -> tarfile.TarInfo:
    """A GNU long-name header: tar readers take its ``size`` bytes as the next member's name."""
    info = tarfile.TarInfo("././@LongLink")
    info.type, info.size = tarfile.GNUTYPE_LONGNAME, size
    return info


def zeros_listed(size: int) -> dict[str, Any]:
    return {"memlane.db": {"sha256": hashlib.sha256(bytes(size)).hexdigest(), "size": size}}


BOMBS = {
    # a header ahead of the manifest that tar readers load whole into memory
    "a long name": (
        [(long_name(BOMB), bytes(BOMB))],
        {},
        None,
        "inflates to more than its manifest lists",
    ),
    # a store of zeros, listed as such: more than may be written, refused before a byte is
    "a listed store": (
        [],
        {"memlane.db": bytes(BOMB)},
        zeros_listed(BOMB),
        "files take 33,554,432 bytes, more than the 4,194,304 that may be written",
    ),
    # a store larger than its listing: refused from its tar header
    "an unlisted size": ([], {"memlane.db": bytes(BOMB)}, None, "does not match its checksum"),
    "a negative size": (
        [],
        {},
        {"ca.crt": {"sha256": "00", "size": -1}},
        "manifest is malformed: a file without its checksum",
    ),
}


@pytest.mark.parametrize("bomb", BOMBS.values(), ids=BOMBS.keys())
async def test_a_gzip_bomb_is_refused_having_inflated_little_and_written_nothing(
    tmp_path: Path, wall: Wall, bomb: tuple[Any, dict[str, bytes], Any, str]
) -> None:
    archive = await an_archive(tmp_path, wall)
    before, change, listed, match = bomb
    crafted = bombed(archive, tmp_path / "c.archive", before, change, listed)
    assert crafted.stat().st_size < BOMB // 256
    (tmp_path / "B").mkdir()
    tracemalloc.start()
    try:
        with pytest.raises(ArchiveError, match=match):
            await restore_archive(crafted, tmp_path / "B", SECRET, now=wall(), max_bytes=4 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"{peak:,} bytes at the peak"
    assert names(tmp_path / "B") == []
    assert not [n for n in names(tmp_path) if n.startswith(".")]


async def test_an_archive_restores_within_the_bytes_its_files_take(
    tmp_path: Path, wall: Wall
) -> None:
    archive = await an_archive(tmp_path, wall)
    total = sum(f["size"] for f in manifest_of(archive)["files"].values())
    with pytest.raises(ArchiveError, match="that may be written"):
        await restore_archive(archive, tmp_path / "B", SECRET, now=wall(), max_bytes=total - 1)
    await restore_archive(archive, tmp_path / "B", SECRET, now=wall(), max_bytes=total)
    async with Node.open(tmp_path / "B", wall=wall) as restored:
        assert (await restored.verify()).ok
