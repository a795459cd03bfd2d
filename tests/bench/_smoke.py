"""The smoke tests' run of one benchmark, at sizes smaller than its ``--quick`` ones.

``python -m tests.bench --quick NAME`` keeps the sizes docs/benchmarks.md gives for it, and runs
every benchmark whose name contains NAME (``sync`` runs ``sync_start`` too).  A smoke test only
checks that every row, ratio and check of one benchmark is printed with a verdict, which smaller
sizes show as well.  ``run_smoke`` runs the same ``main`` of ``tests.bench.__main__`` in a child
process, as ``common.run_bench`` does, after setting module constants (a benchmark's ``QUICK``
sizes) to the values given and narrowing the benchmarks to the one named: it then takes its
``--quick`` path, title mark included, on those sizes.
"""

from __future__ import annotations

import os
import pickle
import subprocess
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from tests.bench import changes, ingest, mcp, quality, semantic, sync, timeline
from tests.bench.common import run_python

__all__ = ["CHANGES", "INGEST", "MCP", "SEMANTIC", "SYNC", "TIMELINE", "locomo", "run_smoke"]

# The sync benchmark's stores for its smoke test and exchange's: about half of ``--quick``'s
# entries, of the same 20 writers (still more than one sync batch, so the cut run resumes after
# a committed one); the in-sync rounds as ``--quick``.  (bundles and bundle_serving keep
# ``--quick``'s 3,000: their chunked import needs more than one chunk of 2,000.)
SYNC = replace(sync.QUICK, name="sync-smoke", entries=1_600)
# The changes benchmark's two stores a fifth of ``--quick``'s (1k and 4k SRs), changed as much.
CHANGES = replace(changes.QUICK, large=4_000, small=1_000, name="changes-smoke")
# The timeline benchmark's store a fifth of ``--quick``'s: 4,000 SRs.
TIMELINE = replace(timeline.QUICK, srs=4_000, name="timeline-4k")
# The MCP benchmark's store a quarter of ``--quick``'s (500 SRs), each side 0.3 s a round.
MCP = replace(
    mcp.QUICK,
    store=replace(mcp.QUICK.store, large=500, small=500, name="mcp-smoke"),
    seconds=0.3,
    name="mcp-smoke",
)
# The semantic benchmark's store a quarter of ``--quick``'s: 500 SRs.
SEMANTIC = replace(semantic.QUICK, srs=500, name="semantic-500")
# The ingest benchmark at half of ``--quick``'s writes, calls and entries.
INGEST = replace(ingest.QUICK, one_author=10, per_author=2, es_calls=50, received=1_000)

_CHILD = """\
import importlib, pickle, sys
import tests.bench.__main__ as bench
name, constants = pickle.loads(bytes.fromhex(sys.argv[1]))
for dotted, value in constants.items():
    module, _, attr = dotted.rpartition(".")
    getattr(importlib.import_module(module), attr)  # only a constant that is there
    setattr(importlib.import_module(module), attr, value)
every = bench.benchmarks
bench.benchmarks = lambda: {n: run for n, run in every().items() if n == name}
sys.exit(bench.main(sys.argv[2:]))
"""


def locomo() -> Path:
    """The LoCoMo split at its default place; the test is skipped without it (said why), or
    fails under CI, which has ``../shared`` beside its clone."""
    data = quality.default_locomo()
    if not list(data.glob("*.json")):
        reason = f"no LoCoMo split in {data} (set MEMLANE_LOCOMO to run this test)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return data


def run_smoke(
    name: str, *options: str, constants: Mapping[str, object], cache: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m tests.bench --quick OPTIONS NAME`` in a child process, running benchmark
    ``name`` alone, with ``constants`` (dotted name → value, e.g.
    ``{"tests.bench.sync.QUICK": SYNC}``) set first; ``cache`` redirects the store cache, as
    in ``run_bench``."""
    given = pickle.dumps((name, dict(constants))).hex()
    return run_python(["-c", _CHILD, given, "--quick", *options, name], cache=cache)
