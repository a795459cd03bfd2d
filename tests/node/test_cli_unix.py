"""The installed ``memlane`` as a Unix tool (docs/cli.md §Conventions): a reader that closes
its pipe early ends the command quietly."""

from __future__ import annotations

import asyncio
import fcntl
import os
import subprocess
from pathlib import Path

import pytest

from node.node import Node
from tests.node.test_cli import MEMLANE, _env, make_token, ok, run

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
    with subprocess.Popen([str(MEMLANE), *map(str, argv)], stdout=write_end,
                          stderr=subprocess.PIPE, env=_env(None, Path("/nonexistent")),
                          ) as proc:  # fmt: skip
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
