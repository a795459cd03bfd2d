"""``memlane bundle`` and ``memlane archive`` end to end: real subprocesses, real data
directories (docs/cli.md)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

import pytest

from node.node import Node
from tests.node.bundlekit import caller, write
from tests.node.conftest import Wall
from tests.node.helpers import events
from tests.node.synckit import held, make_mesh
from tests.node.test_cli import MEMLANE, ok, run


@pytest.mark.asyncio
async def test_bundles_and_archives_from_the_command_line(tmp_path: Path, wall: Wall) -> None:
    dirs = await make_mesh(tmp_path, ["A", "B"], wall)
    async with Node.open(dirs["A"], wall=wall) as a:
        await write(a, await caller(a), "one", "two")
    a_dir, b_dir = dirs["A"], dirs["B"]

    ok(run("bundle", "frontier", tmp_path / "b.frontier", "--data", b_dir))
    since = ("--since-frontier", tmp_path / "b.frontier")
    out = ok(run("bundle", "export", tmp_path / "a.bundle", *since, "--workspace", "team",
                 "--data", a_dir, "--json"))  # fmt: skip
    exported = json.loads(out)
    assert exported["entries"] == 2
    first = json.loads(ok(run("bundle", "import", tmp_path / "a.bundle", "--data", b_dir,
                              "--json")))  # fmt: skip
    assert (first["new"], first["bundle"]) == (2, exported["bundle_id"])
    again = ok(run("bundle", "import", tmp_path / "a.bundle", "--data", b_dir))
    assert "0 new, 2 already present, 0 payloads filled, 0 pending, 0 rejected" in again
    token = ok(run("token", "create", "--data", b_dir, "--principal", "bob", "--workspace",
                   "team", "--scope", "read:workspace")).strip()  # fmt: skip
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
    ok(run("archive", "create", tmp_path / "a.archive", "--passphrase-file", tmp_path / "pass",
           "--data", a_dir))  # fmt: skip
    (tmp_path / "wrong").write_text("another\n")
    wrong = run("archive", "restore", tmp_path / "a.archive", "--data", tmp_path / "A2",
                "--passphrase-file", tmp_path / "wrong")  # fmt: skip
    assert wrong.returncode == 1
    assert "the passphrase does not open this archive" in wrong.stderr
    restored = json.loads(ok(run("archive", "restore", tmp_path / "a.archive", "--data",
                                 tmp_path / "A2", "--passphrase-file", tmp_path / "pass",
                                 "--json")))  # fmt: skip
    assert restored["tokens_revoked"] == restored["tokens"] == 1

    async with Node.open(tmp_path / "A2", wall=wall) as a2, Node.open(b_dir, wall=wall) as b:
        assert await held(a2) == await held(b)
        assert len(await events(b, "bundle_imported")) == 2
        assert a2.info.feed_id == restored["feed_id"]


def on_terminal(argv: list[str]) -> tuple[int, str]:
    """Run ``argv`` with its stderr on a pseudo-terminal; its exit code and what it showed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    main, terminal = pty.openpty()
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=terminal, env=env,
                              timeout=60, check=False)  # fmt: skip
        return done.returncode, os.read(main, 1 << 16).decode()
    finally:
        os.close(main)
        os.close(terminal)


@pytest.mark.asyncio
async def test_import_shows_progress_on_a_terminal_only(tmp_path: Path, wall: Wall) -> None:
    dirs = await make_mesh(tmp_path, ["A", "B"], wall)
    async with Node.open(dirs["A"], wall=wall) as a:
        await a.export_bundle(tmp_path / "a.bundle")
    argv = [str(MEMLANE), "bundle", "import", str(tmp_path / "a.bundle"), "--data", str(dirs["B"])]
    code, shown = on_terminal(argv)
    assert code == 0
    assert "verify  [" in shown
    assert "import  [##############################] 100.0%" in shown
    piped = run("bundle", "import", tmp_path / "a.bundle", "--data", dirs["B"])
    assert piped.stderr == ""
