"""The installed ``memlane`` as a Unix tool (docs/cli.md §Conventions): a reader that closes
its pipe early ends the command quietly; the global options go before or after any command
word; ``--version``.  The pipe and ``--version`` in real processes of the installed command;
the options' order in-process (tests/node/clikit.py)."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import subprocess
from importlib.metadata import version
from pathlib import Path

import pytest

from node.node import Node
from tests.node.clikit import MEMLANE, environment, make_token, ok, run, run_all, run_processes

SIGPIPE_STATUS = 141  # what a shell reports for a tool ended by SIGPIPE: 128 + 13


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A node with 100 SRs of long titles (a listing of ~100 kB) and a token reading them."""
    data = tmp_path_factory.mktemp("pipe") / "node"
    ok(run("init", "--data", data))
    token = make_token(data, "read:workspace", "write:workspace")

    async def fill() -> None:
        async with Node.open(data) as node:
            caller = await node.authenticate(token)
            for i in range(100):
                await node.e_write(caller, title=f"{i:03d} " + "x" * 990)

    asyncio.run(fill())
    return data, token


def first_line_then_close(*argv: str | Path) -> tuple[bytes, int, str]:
    """Run the command into a pipe of one page (the smallest Linux allows, so the output
    cannot fit in it), read one line, close the pipe; the line, exit code and stderr."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    with subprocess.Popen(
        [str(MEMLANE), *map(str, argv)],
        stdout=write_end,
        stderr=subprocess.PIPE,
        env=environment(None, Path("/nonexistent")),
    ) as proc:
        os.close(write_end)
        with os.fdopen(read_end, "rb") as reader:
            line = reader.readline()
        _, err = proc.communicate(timeout=60)
    return line, proc.returncode, err.decode()


@pytest.mark.parametrize("shape", [(), ("--json",)])
def test_a_closed_pipe_ends_the_command_quietly(crowded, shape):
    data, token = crowded
    line, code, err = first_line_then_close(
        "timeline", "list", "--page-size", "100", "--data", data, "--token", token, *shape
    )
    assert line.strip()
    assert err == ""
    assert code == SIGPIPE_STATUS


# -- global options ------------------------------------------------------------------------------


def test_global_options_before_or_after_any_command_word(crowded, tmp_path):
    data, token = crowded
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    config = tmp_path / "elsewhere.toml"
    config.write_text("")
    d = str(data)
    argvs = [
        ["--data", d, "--token", token, "timeline", "list", "--page-size", "1"],
        ["timeline", "--data", d, "--token-file", str(token_file), "list", "--page-size", "1"],
        ["timeline", "list", "--page-size", "1", "--data", d, "--token", token],
        ["--json", "--data", d, "--token", token, "timeline", "list", "--page-size", "1"],
        ["timeline", "--json", "list", "--data", d, "--token", token, "--page-size", "1"],
        ["--data", d, "log", "verify"],
        ["log", "--data", d, "verify", "--json"],
        ["--config", str(config), "--data", d, "config", "check"],
        ["config", "--config", str(config), "check", "--data", d],
        ["--data", "/nonexistent-node", "log", "verify", "--data", d],  # the last one wins
    ]
    done = run_all(argvs, tmp_path)
    listed = [ok(r) for r in done[:5]]
    assert listed[0] == listed[1] == listed[2]
    assert "000 xxx" not in listed[0]  # the newest SR, page size 1
    assert json.loads(listed[3]) == json.loads(listed[4])
    assert json.loads(listed[3])["results"][0]["title"].startswith("099 ")
    assert ok(done[5]).startswith("ok: ")
    assert json.loads(ok(done[6]))["ok"] is True
    assert ok(done[7]) == ok(done[8]) == f"ok: {config}, with MEMLANE_HEALTH, MEMLANE_DISCOVERY\n"
    assert ok(done[9]).startswith("ok: ")


def test_version_comes_from_the_package_metadata(tmp_path):
    (shown, helped) = run_processes([["--version"], ["--help"]], tmp_path)
    assert ok(shown) == f"memlane {version('memlane')}\n"
    assert "--version" in ok(helped)
