"""``memlane bundle`` and ``memlane archive`` end to end: real data directories, each command
in-process through the command line's entry point (tests/node/clikit.py), on a terminal in a
real process (docs/cli.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from node.node import Node
from tests.node.bundlekit import caller, write
from tests.node.clikit import MEMLANE, drawn, ok, on_terminal, run
from tests.node.helpers import Wall, events
from tests.node.synckit import held, make_mesh


@pytest.mark.asyncio
async def test_bundles_and_archives_from_the_command_line(tmp_path: Path, wall: Wall) -> None:
    dirs = await make_mesh(tmp_path, ["A", "B"], wall)
    async with Node.open(dirs["A"], wall=wall) as a:
        await write(a, await caller(a), "one", "two")
    a_dir, b_dir = dirs["A"], dirs["B"]

    ok(run("bundle", "frontier", tmp_path / "b.frontier", "--data", b_dir))
    since = ("--since-frontier", tmp_path / "b.frontier")
    out = ok(
        run(
            "bundle",
            "export",
            tmp_path / "a.bundle",
            *since,
            "--workspace",
            "team",
            "--data",
            a_dir,
            "--json",
        )
    )
    exported = json.loads(out)
    assert exported["entries"] == 2
    first = json.loads(
        ok(run("bundle", "import", tmp_path / "a.bundle", "--data", b_dir, "--json"))
    )
    assert (first["new"], first["bundle"]) == (2, exported["bundle_id"])
    again = ok(run("bundle", "import", tmp_path / "a.bundle", "--data", b_dir))
    assert "0 new, 2 already present, 0 payloads filled, 0 pending, 0 rejected" in again
    token = ok(
        run(
            "token",
            "create",
            "--data",
            b_dir,
            "--principal",
            "bob",
            "--workspace",
            "team",
            "--scope",
            "read:workspace",
        )
    ).strip()
    feed = ok(run("audit", "--data", b_dir, "--token", token)).splitlines()
    assert feed[0].split() == ["SEQ", "EVENT", "AT", "SUBJECT"]
    assert feed[1].split()[1] == "bundle_imported"  # the second brought bob nothing
    assert feed[1].endswith("  2 entries: 2 SRs, 0 episodes")
    assert len(feed) == 3

    refused = run("bundle", "import", tmp_path / "b.frontier", "--data", b_dir)
    assert refused.returncode == 1
    assert "is refused: magic: not a memlane bundle" in refused.stderr
    assert "Traceback" not in refused.stderr

    (tmp_path / "pass").write_text("a long passphrase\n")
    ok(
        run(
            "archive",
            "create",
            tmp_path / "a.archive",
            "--passphrase-file",
            tmp_path / "pass",
            "--data",
            a_dir,
        )
    )
    (tmp_path / "wrong").write_text("another\n")
    wrong = run(
        "archive",
        "restore",
        tmp_path / "a.archive",
        "--data",
        tmp_path / "A2",
        "--passphrase-file",
        tmp_path / "wrong",
    )
    assert wrong.returncode == 1
    assert "the passphrase does not open this archive" in wrong.stderr
    restored = json.loads(
        ok(
            run(
                "archive",
                "restore",
                tmp_path / "a.archive",
                "--data",
                tmp_path / "A2",
                "--passphrase-file",
                tmp_path / "pass",
                "--json",
            )
        )
    )
    assert restored["tokens_revoked"] == restored["tokens"] == 1

    async with Node.open(tmp_path / "A2", wall=wall) as a2, Node.open(b_dir, wall=wall) as b:
        assert await held(a2) == await held(b)
        assert len(await events(b, "bundle_imported")) == 2
        assert a2.info.feed_id == restored["feed_id"]


@pytest.mark.asyncio
async def test_long_work_shows_progress_on_a_terminal_only(tmp_path: Path, wall: Wall) -> None:
    """Import, export, views rebuild, archive create and restore: a bar per phase on a
    terminal; on a pipe, nothing on stderr at all."""
    dirs = await make_mesh(tmp_path, ["A", "B"], wall)
    async with Node.open(dirs["A"], wall=wall) as a:
        await write(a, await caller(a), *[f"note {i}" for i in range(50)])
    (tmp_path / "pass").write_text("a long passphrase\n")
    a_dir, b_dir, secret = str(dirs["A"]), str(dirs["B"]), str(tmp_path / "pass")
    commands = [
        (["bundle", "export", str(tmp_path / "t.bundle"), "--data", a_dir], ["export"]),
        (["bundle", "import", str(tmp_path / "t.bundle"), "--data", b_dir], ["verify", "import"]),
        (["views", "rebuild", "--data", b_dir], ["rebuild"]),
        (
            [
                "archive",
                "create",
                str(tmp_path / "t.archive"),
                "--data",
                a_dir,
                "--passphrase-file",
                secret,
            ],
            ["snapshot", "write"],
        ),
        (
            [
                "archive",
                "restore",
                str(tmp_path / "t.archive"),
                "--data",
                str(tmp_path / "T2"),
                "--passphrase-file",
                secret,
            ],
            ["unpack"],
        ),
    ]
    for argv, phases in commands:
        code, shown = on_terminal([str(MEMLANE), *argv])
        assert code == 0, shown
        assert all(drawn(shown, phase) for phase in phases), (argv, shown)
    for name in ("p.bundle", "p.archive"):
        (tmp_path / name).unlink(missing_ok=True)
    piped = [
        run("bundle", "export", tmp_path / "p.bundle", "--data", a_dir),
        run("bundle", "import", tmp_path / "p.bundle", "--data", b_dir),
        run("views", "rebuild", "--data", b_dir),
        run(
            "archive",
            "create",
            tmp_path / "p.archive",
            "--data",
            a_dir,
            "--passphrase-file",
            secret,
        ),
    ]
    assert [(p.returncode, p.stderr) for p in piped] == [(0, "")] * len(piped)
