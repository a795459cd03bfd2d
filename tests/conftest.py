"""What every test's child processes share, and the tests that need an optional extra.

The tests launch hundreds of Python processes: the ``memlane`` command, served nodes, the crash
tests' children, the benchmarks' smoke runs and the workers they spawn.  Where the environment
sets ``PYTHONDONTWRITEBYTECODE`` (this machine's does), memlane's own modules never get their
bytecode kept, so every one of those processes compiles each module it imports again before it
does anything (~0.2 s of a crash child's 0.7 s start on two cores).  The tests let them keep it:
in ``__pycache__`` beside the sources, as without the variable (git and the container build
ignore it).  What they run is the same code.
"""

from __future__ import annotations

import os
import sys

import pytest

from tests.extras import need

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked ``extra(NAME)`` skips, saying why, without that extra (tests/extras.py)."""
    for mark in item.iter_markers("extra"):
        need(mark.args[0])
