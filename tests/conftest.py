"""What every test's child processes share; the tests that need an optional extra; how
``pytest -n N`` spreads the tests over its workers (tests/parallel.py).

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
from typing import Any

import pytest

from tests.extras import need

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


@pytest.hookimpl(optionalhook=True)  # (a hook of pytest-xdist, the dev extra's)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``pytest -n N`` (xdist's default ``--dist load``), the groups of
    tests/parallel.py each run in one worker; another ``--dist`` is left as asked."""
    if config.getoption("dist") != "load":
        return None
    from tests.parallel import Grouped

    return Grouped(config, log)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked ``extra(NAME)`` skips, saying why, without that extra (tests/extras.py)."""
    for mark in item.iter_markers("extra"):
        need(mark.args[0])
