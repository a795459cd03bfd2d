"""Timing and reporting helpers shared by the benchmarks.

A benchmark module measures ``Row``s (a count of items and the wall time of each repeat; the
figure is items per second over the median repeat) and states ``Ratio``s between rows, some
with a target.  ``render`` prints them as one table.  Nothing here asserts on speed.
"""

from __future__ import annotations

import fcntl
import json
import math
import multiprocessing
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.clock import Hlc
from protocol.kinds import encode_payload
from protocol.signing import SigningKey, seal

__all__ = [
    "SMOKE",
    "Bound",
    "Check",
    "Checked",
    "Latency",
    "Ratio",
    "Report",
    "Result",
    "Row",
    "Stopwatch",
    "Timed",
    "Writers",
    "cache_root",
    "cached",
    "cached_at",
    "in_child",
    "peak_rss_mib",
    "progress",
    "quantile",
    "receive_batch",
    "render",
    "run_bench",
    "table",
    "tail",
    "verdict",
]


SMOKE = " — QUICK: a smoke run, the figures mean nothing"  # a title's mark of a --quick run


def cached_at(path: Path, built: bool) -> tuple[str, Path]:
    """How a cached store came to be, and the folder it lies in (relative to here when
    under it), for a benchmark's notes."""
    where = path.parent
    if where.is_relative_to(Path.cwd()):
        where = where.relative_to(Path.cwd())
    return ("built by this run" if built else "reused from the cache"), where


def peak_rss_mib() -> float:
    """This process's peak resident set so far (``ru_maxrss`` is KiB on Linux, bytes on
    macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def progress(message: str) -> None:
    """A line on stderr, so stdout carries only the table."""
    print(message, file=sys.stderr, flush=True)


class Stopwatch:
    """``with Stopwatch() as sw: ...`` then ``sw.seconds`` (``time.perf_counter``)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0

    def __enter__(self) -> Stopwatch:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._start


@dataclass(frozen=True, slots=True)
class Row:
    """One measurement: ``count`` items per repeat, the seconds each repeat took, and the
    process's peak RSS once it was taken."""

    label: str
    count: int
    seconds: tuple[float, ...]
    unit: str = "entries/s"
    note: str = ""
    rss_mib: float = field(default_factory=peak_rss_mib)

    def __post_init__(self) -> None:
        if self.count <= 0 or not self.seconds or min(self.seconds) <= 0:
            raise ValueError(f"{self.label}: a row needs a positive count and timings")

    @property
    def rate(self) -> float:
        return self.count / statistics.median(self.seconds)


@dataclass(frozen=True, slots=True)
class Ratio:
    """The rate of row ``numerator`` over that of row ``denominator`` (by label), held
    against ``target`` (≥) when there is one."""

    label: str
    numerator: str
    denominator: str
    target: float | None = None

    def value(self, rows: dict[str, Row]) -> float:
        return rows[self.numerator].rate / rows[self.denominator].rate

    def verdict(self, rows: dict[str, Row]) -> str:
        if self.target is None:
            return "(info)"
        return "PASS" if self.value(rows) >= self.target else "FAIL"


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank); infinite where there are none, so that
    a bound on it fails."""
    if not values:
        return math.inf
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


@dataclass(slots=True)
class Timed:
    """The seconds of each timed call (or block of calls) of one engine or store, and how many
    results its calls gave in all."""

    label: str = ""
    seconds: list[float] = field(default_factory=list)
    results: int = 0

    def add(self, call: Callable[[], Any]) -> Any:
        """Run ``call``, its seconds taken; what it returns."""
        t0 = time.perf_counter()
        out = call()
        self.seconds.append(time.perf_counter() - t0)
        return out

    def quantile_ms(self, q: float) -> float:
        return quantile(self.seconds, q) * 1000

    @property
    def median_ms(self) -> float:
        return statistics.median(self.seconds) * 1000

    @property
    def total(self) -> float:
        return sum(self.seconds)


@dataclass(frozen=True, slots=True)
class Latency:
    """One query timed beside its baseline: the seconds of each run of each (the figures are
    the median and the 90th percentile), and the process's peak RSS once it was taken."""

    label: str
    seconds: tuple[float, ...]
    baseline: tuple[float, ...]
    note: str = ""
    rss_mib: float = field(default_factory=peak_rss_mib)

    def __post_init__(self) -> None:
        if not self.seconds or not self.baseline:
            raise ValueError(f"{self.label}: a latency needs timings on both sides")

    @property
    def median_ms(self) -> float:
        return statistics.median(self.seconds) * 1000

    @property
    def p90_ms(self) -> float:
        return quantile(self.seconds, 0.9) * 1000

    @property
    def baseline_median_ms(self) -> float:
        return statistics.median(self.baseline) * 1000

    @property
    def baseline_p90_ms(self) -> float:
        return quantile(self.baseline, 0.9) * 1000

    @property
    def ratio(self) -> float:
        """Median over the baseline's median."""
        return self.median_ms / self.baseline_median_ms


@dataclass(frozen=True, slots=True)
class Bound:
    """An upper bound on one latency (by label): its median in ms (``what="median"``) or its
    median over its baseline's (``what="ratio"``); ``versus`` names the baseline."""

    latency: str
    what: str
    limit: float
    versus: str = "raw"

    @property
    def label(self) -> str:
        return f"{self.latency}: {'median' if self.what == 'median' else 'ratio to ' + self.versus}"

    def value(self, latencies: dict[str, Latency]) -> float:
        found = latencies[self.latency]
        return found.median_ms if self.what == "median" else found.ratio

    def target(self) -> str:
        return f"≤ {self.limit:g} ms" if self.what == "median" else f"≤ {self.limit:g}×"

    def verdict(self, latencies: dict[str, Latency]) -> str:
        return "PASS" if self.value(latencies) <= self.limit else "FAIL"


@dataclass(slots=True)
class Result:
    """What one benchmark module reports."""

    title: str
    rows: list[Row] = field(default_factory=list)
    ratios: list[Ratio] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    latencies: list[Latency] = field(default_factory=list)
    bounds: list[Bound] = field(default_factory=list)
    baseline: str = "raw"  # what the latencies' baselines are, in the table's header

    def by_label(self) -> dict[str, Row]:
        return {row.label: row for row in self.rows}


def _rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def run_bench(*args: str, cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m tests.bench ARGS`` in a child process, as ``make bench`` runs it (the smoke
    tests' one way in); ``cache`` redirects the store cache."""
    return run_python(["-m", "tests.bench", *args], cache=cache)


def run_python(argv: list[str], cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    """This interpreter with ``argv`` in the project's root, its output captured, within
    120 s; ``cache`` redirects the benchmarks' store cache."""
    env = {**os.environ, "MEMLANE_BENCH_CACHE": str(cache)} if cache else None
    return subprocess.run(
        [sys.executable, *argv],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


class Writers:
    """``n`` foreign writers of a node's mesh, sealing ``sr.put`` entries in turn (entry i by
    writer i mod n), each its own key (``seed`` + its number) and log."""

    def __init__(self, mesh: bytes, n: int, seed: int) -> None:
        self.mesh = mesh
        self.keys = [SigningKey(bytes([seed + w]) * 32) for w in range(n)]
        self._seqs = [0] * n
        self._prevs: list[bytes | None] = [None] * n

    def sealed(self, i: int, wall: int, payload: dict[str, Any]) -> tuple[bytes, bytes | None]:
        """Entry ``i``: its raw header and payload, as a receive takes them."""
        w = i % len(self.keys)
        self._seqs[w] += 1
        entry = seal(
            self.keys[w],
            mesh=self.mesh,
            epoch=bytes([w + 1]) * 8,
            seq=self._seqs[w],
            prev=self._prevs[w],
            hlc=Hlc(wall, 0),
            kind="sr.put",
            payload=encode_payload("sr.put", payload),
        )
        self._prevs[w] = entry.id
        return entry.raw, entry.payload


async def receive_batch(node: Any, batch: list[tuple[bytes, bytes | None]]) -> float:
    """Receive one batch through the node's real receive path; its seconds.  Every entry must
    be stored (a builder that silently dropped entries would measure the wrong store)."""
    with Stopwatch() as sw:
        report = await node.receive(batch, source="bench")
    if report.stored != len(batch):
        raise RuntimeError(f"stored {report.stored} of a batch of {len(batch)}")
    return sw.seconds


def table(header: Sequence[str], lines: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *lines, strict=True)]

    def fmt(cells: Sequence[str]) -> str:
        parts = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    return [fmt(header), fmt(["-" * w for w in widths]), *(fmt(line) for line in lines)]


def _ms(value: float) -> str:
    return f"{value:,.3f}" if value < 10 else f"{value:,.1f}"


def _latency_tables(result: Result) -> list[str]:
    timed = [
        [
            q.label,
            _ms(q.median_ms),
            _ms(q.p90_ms),
            _ms(q.baseline_median_ms),
            _ms(q.baseline_p90_ms),
            f"{q.ratio:.2f}",
            str(len(q.seconds)),
            f"{q.rss_mib:,.0f} MiB",
            q.note,
        ]
        for q in result.latencies
    ]
    base = result.baseline
    out = table(
        [
            "query",
            "median ms",
            "p90 ms",
            f"{base} median ms",
            f"{base} p90 ms",
            "ratio",
            "runs",
            "peak RSS",
            "note",
        ],
        timed,
        right={1, 2, 3, 4, 5, 6, 7},
    )
    if result.bounds:
        by_label = {q.label: q for q in result.latencies}
        checks = [
            [
                b.label,
                f"{b.value(by_label):.3f}" if b.what == "median" else f"{b.value(by_label):.2f}",
                b.target(),
                b.verdict(by_label),
            ]
            for b in result.bounds
        ]
        out += ["", *table(["bound", "value", "target", "verdict"], checks, right={1})]
    return out


@dataclass(frozen=True, slots=True)
class Check:
    """One check printed under a benchmark's table."""

    label: str
    value: str
    target: str
    verdict: str  # PASS | FAIL | (info)


def tail(checks: Sequence[Check], notes: Sequence[str]) -> list[str]:
    """The lines under a benchmark's own table: its checks, the run's peak RSS, its notes."""
    rows = [[c.label, c.value, c.target, c.verdict] for c in checks]
    out = ["", *table(["check", "value", "target", "verdict"], rows, right={1})]
    out += ["", f"peak RSS of the run: {peak_rss_mib():,.0f} MiB"]
    return out + [f"note: {n}" for n in notes]


@dataclass(slots=True)
class Report:
    """A benchmark that prints tables of its own (``lines``) under its title, then its checks
    and notes (``tail``)."""

    title: str
    lines: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join([self.title, *self.lines, *tail(self.checks, self.notes)])


@dataclass(slots=True)
class Checked:
    """A result (``render``) and, under its table, checks: (label, value, target, verdict)."""

    result: Result
    checks: list[tuple[str, str, str, str]]

    def __str__(self) -> str:
        text = render(self.result)
        head, sep, tail = text.partition("\npeak RSS of the run")
        lines = table(["check", "value", "target", "verdict"], self.checks, right={1})
        return head + "\n" + "\n".join(lines) + "\n" + sep + tail


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def render(result: Result) -> str:
    """The result as one plain-text table: measurements, then ratios against targets (or,
    for latencies, the bounds on them)."""
    if result.latencies:
        out = [result.title, "", *_latency_tables(result)]
        out += ["", f"peak RSS of the run: {peak_rss_mib():,.0f} MiB"]
        out += [f"note: {n}" for n in result.notes]
        return "\n".join(out)
    rows = result.by_label()
    measured = [
        [
            r.label,
            _rate(r.rate),
            r.unit,
            f"{r.count:,}",
            str(len(r.seconds)),
            f"{r.rss_mib:,.0f} MiB",
            r.note,
        ]
        for r in result.rows
    ]
    out = [result.title, ""]
    out += table(
        ["measurement", "rate", "unit", "items", "runs", "peak RSS", "note"],
        measured,
        right={1, 3, 4, 5},
    )
    ratios = [
        [
            q.label,
            f"{q.value(rows):.2f}",
            f"≥ {q.target:g}" if q.target is not None else "",
            q.verdict(rows),
        ]
        for q in result.ratios
    ]
    out += ["", *table(["ratio", "value", "target", "verdict"], ratios, right={1})]
    out += ["", f"peak RSS of the run: {peak_rss_mib():,.0f} MiB"]
    out += [f"note: {n}" for n in result.notes]
    return "\n".join(out)


def cache_root() -> Path:
    """``MEMLANE_BENCH_CACHE``, or ``.bench-cache/`` at the repository's root."""
    env = os.environ.get("MEMLANE_BENCH_CACHE")
    return Path(env) if env else Path(__file__).resolve().parents[2] / ".bench-cache"


def in_child(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` run in a spawned child process (its own resident set, nothing of this
    one's memory for its collector to walk); its result."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        return pool.submit(fn, *args).result()


def cached(
    name: str, key: str, what: str, build: Callable[..., dict[str, Any]], *args: Any
) -> tuple[Path, dict[str, Any], bool]:
    """The directory cached as ``name`` for ``key``, its metadata (``meta.json``), and whether
    it was built now.  A missing or stale one is built by ``build(directory, *args)`` (a
    module-level function returning the metadata) in a child process — so the measuring
    process's RSS is its own — and moved into place only once complete.  ``what`` names it
    in progress lines.  A lock file keeps concurrent runs from building it twice."""
    root = cache_root() / name
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        meta_file = root / "meta.json"
        if meta_file.exists():
            meta: dict[str, Any] = json.loads(meta_file.read_text())
            if meta.get("key") == key:
                return root, meta, False
            progress(f"{name}: the cached {what} is stale ({meta.get('key')}); rebuilding")
        shutil.rmtree(root, ignore_errors=True)
        building = root.with_name(name + ".building")
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir()
        progress(f"{name}: building {what} in {root} (cached)")
        meta = in_child(build, str(building), *args)
        meta["key"] = key
        (building / "meta.json").write_text(json.dumps(meta))
        building.rename(root)
        return root, meta, True
