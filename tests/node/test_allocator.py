"""``give_back`` (node/allocator.py) returns freed heap memory to the system: the hundred
2 MiB arrays below, freed under one kept above them after glibc's threshold rose, stay
resident (some 200 MiB) until it is called."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

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


def test_freed_arrays_go_back_to_the_system():
    if platform.libc_ver()[0] != "glibc":
        print("skipped: malloc_trim is glibc's")
        pytest.skip("malloc_trim is glibc's")
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    held, after, given = done.stdout.split()
    assert int(held) >= 150  # what the probe shows without it: glibc keeps them
    assert int(after) <= 20
    assert given == "True"
