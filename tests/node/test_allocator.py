"""``give_back`` (node/allocator.py) returns freed heap memory to the system: the hundred
2 MiB arrays below, freed under one kept above them after glibc's threshold rose, stay
resident (some 200 MiB) until it is called.  ``one_arena``: a process that opens a node
before its threads allocate keeps one heap for all of them, unless its environment says
otherwise."""

from __future__ import annotations

import asyncio
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from node.node import Node

_PROBE = """
import numpy as np
from node.allocator import give_back

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024

big = np.ones(16 << 20, np.uint8); del big  # a mapped block freed: glibc's threshold rises
before = rss()
blocks = [np.ones(2 << 20, np.uint8) for _ in range(100)]
kept = np.ones(2 << 20, np.uint8)  # above them on the heap
del blocks
held = rss() - before
given = give_back()
print(held, rss() - before, given)
"""


# A node opened, an SR written (the store's threads allocate), and another thread allocating
# after it; then glibc's count of its heaps (arenas), which malloc_stats prints to stderr.
_HEAPS = """
import asyncio, ctypes, sys, threading
from node.node import Node

async def write(path):
    async with Node.open(path) as node:
        caller = await node.authenticate(open(path + "/token").read())
        await node.e_write(caller, title="a heap", text="written by the store's threads")

asyncio.run(write(sys.argv[1]))
worker = threading.Thread(target=lambda: [bytearray(1 << 20) for _ in range(8)])
worker.start()
worker.join()
ctypes.CDLL("libc.so.6").malloc_stats()
"""


def _glibc_only(what: str) -> None:
    if platform.libc_ver()[0] != "glibc":
        print(f"skipped: {what} is glibc's")
        pytest.skip(f"{what} is glibc's")


def _heaps(data: Path, env: dict[str, str]) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _HEAPS, str(data)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=env,
    )
    return sum(line.startswith("Arena ") for line in done.stderr.splitlines())


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("heaps")

    async def made() -> None:
        await Node.init(path)
        async with Node.open(path) as node:
            scopes = ("read:workspace", "write:workspace")
            issued = await node.create_token("writer", "team", scopes)
        (path / "token").write_text(issued.token)

    asyncio.run(made())
    return path


def test_a_process_that_opens_a_node_first_keeps_one_heap(data: Path) -> None:
    _glibc_only("M_ARENA_MAX")
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    assert _heaps(data, env) == 1


def test_malloc_arena_max_in_the_environment_is_glibcs_to_obey(data: Path) -> None:
    _glibc_only("MALLOC_ARENA_MAX")
    assert _heaps(data, {**os.environ, "MALLOC_ARENA_MAX": "4"}) > 1


def test_freed_arrays_go_back_to_the_system():
    _glibc_only("malloc_trim")
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    held, after, given = done.stdout.split()
    assert int(held) >= 150  # what the probe shows without it: glibc keeps them
    assert int(after) <= 20
    assert given == "True"
