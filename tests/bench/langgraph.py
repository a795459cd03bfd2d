"""The langgraph benchmark (docs/benchmarks.md §langgraph, docs/langgraph.md): ``MemlaneStore``
beside LangGraph's ``SqliteStore`` (langgraph-checkpoint-sqlite) on the same items, in the same
run, each into a fresh file of its own.

100,000 items (``--quick``: 1,000) in 100 namespaces ``("users", "u<n mod 100>")``, keyed
``k<n>``, each value a small JSON dict of a few fields of different types (a name, an integer
score, a float weight, a boolean, a list of tags, a note of six words).  Measured side by side,
alternating between the two stores:

- **put**: every item, in batches of 100 ``PutOp``s (as an application writes a batch), the
  two stores taking the batches in turn; items per second over all batches;
- **get**: random existing keys, one ``get`` at a time, blocks of 100 in turn; gets per second;
- **search, no query**: a namespace prefix and a filter — one user's namespace, and the whole
  ``("users",)`` — newest first, ``limit`` 10, query by query in turn; median and p99;
- **search with a query**: memlane's (``find``, ranked) alone, as information: SqliteStore
  without an embedder does not rank.

Targets: each search without a query within 2 × SqliteStore's (median and p99), and get ≥
0.2 × SqliteStore's rate.  Nothing here asserts on a figure.
"""

from __future__ import annotations

import asyncio
import os
import platform
import random
import sqlite3
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from langgraph.store.base import BaseStore, PutOp
from langgraph.store.sqlite import SqliteStore

from node.langgraph import MemlaneStore
from node.node import Node
from tests.bench.common import SMOKE, Check, Report, Timed, progress, table, verdict

__all__ = ["CHECKS", "FULL", "QUICK", "ROWS", "SEARCHES", "Sizes", "run"]

MEMLANE, SQLITE = "MemlaneStore", "SqliteStore"
SEARCH_RATIO = 2.0  # memlane's search without a query ≤ 2 × SqliteStore's, median and p99
GET_RATIO = 0.2  # memlane's get rate ≥ 0.2 × SqliteStore's
PUT, GET = "put", "get"
ROWS = (PUT, GET)
NARROW, WIDE = "search: one user's namespace + filter", "search: ('users',) + filter"
FIND = "search with a query (find)"
SEARCHES = (NARROW, WIDE)
CHECKS = (
    f"{GET}: memlane / SqliteStore",
    *(f"{s}: {q} / SqliteStore's" for s in SEARCHES for q in ("median", "p99")),
    f"{PUT}: memlane / SqliteStore",
)
WORKSPACE = "team"
WORDS = [
    "amber",
    "basalt",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "granite",
    "harbor",
    "indigo",
    "juniper",
    "kelp",
    "lagoon",
    "meadow",
    "nickel",
    "orchid",
    "pebble",
    "quartz",
    "river",
    "saffron",
    "tundra",
]
_SEED = 20_260_444


@dataclass(frozen=True, slots=True)
class Sizes:
    items: int
    users: int = 100
    batch: int = 100  # PutOps a batch
    gets: int = 20_000
    searches: int = 300  # of each kind, each store
    warmup: int = 10  # of each kind, each store, untimed


FULL = Sizes(100_000)
QUICK = Sizes(1_000, gets=1_000, searches=30, warmup=3)


# -- the items ---------------------------------------------------------------------------------


def value(n: int) -> dict[str, Any]:
    """Item ``n``'s value: a few fields of different types, seeded by ``n``."""
    rng = random.Random(_SEED + n)
    return {
        "name": f"item {n}",
        "score": rng.randrange(1_000),
        "weight": round(rng.random(), 4),
        "active": rng.random() < 0.5,
        "tags": rng.sample(WORDS, 2),
        "note": " ".join(rng.choices(WORDS, k=6)),
    }


def namespace(n: int, sizes: Sizes) -> tuple[str, str]:
    return ("users", f"u{n % sizes.users}")


def batches(sizes: Sizes) -> Iterator[list[PutOp]]:
    for start in range(0, sizes.items, sizes.batch):
        stop = min(start + sizes.batch, sizes.items)
        yield [PutOp(namespace(n, sizes), f"k{n}", value(n)) for n in range(start, stop)]


# -- the stores --------------------------------------------------------------------------------


def _memlane(path: Path) -> MemlaneStore:
    """A fresh node in ``path`` and a read-write token of it, as an application opens it."""

    async def made() -> str:
        await Node.init(path)
        async with Node.open(path) as node:
            scopes = ("read:workspace", "write:workspace")
            return (await node.create_token("app", WORKSPACE, scopes)).token

    return MemlaneStore(path, asyncio.run(made()))


def _sqlite(path: Path, stack: ExitStack) -> SqliteStore:
    store = stack.enter_context(SqliteStore.from_conn_string(str(path)))
    store.setup()
    return store


# -- timing, alternating -----------------------------------------------------------------------


Pair = dict[str, BaseStore]


def _in_turn(stores: Pair, i: int) -> list[str]:
    """The stores' names, the first of them rotating with ``i``."""
    names = list(stores)
    return names[i % len(names) :] + names[: i % len(names)]


def _puts(stores: Pair, sizes: Sizes) -> dict[str, Timed]:
    timed = {name: Timed() for name in stores}
    for i, ops in enumerate(batches(sizes)):
        for name in _in_turn(stores, i):
            timed[name].add(lambda s=stores[name], o=ops: s.batch(o))
        if (i + 1) * sizes.batch % 20_000 == 0:
            progress(f"langgraph: put {(i + 1) * sizes.batch:,} items into each store")
    return timed


def _gets(stores: Pair, sizes: Sizes) -> dict[str, Timed]:
    rng = random.Random(_SEED)
    keys = [(namespace(n, sizes), f"k{n}") for n in rng.choices(range(sizes.items), k=sizes.gets)]
    blocks = [keys[i : i + 100] for i in range(0, len(keys), 100)]
    timed = {name: Timed() for name in stores}
    for i, block in enumerate(blocks):
        for name in _in_turn(stores, i):
            got = timed[name].add(lambda s=stores[name], b=block: [s.get(*k) for k in b])
            if any(item is None for item in got):
                raise RuntimeError(f"{name}: a get of a stored key found nothing")
    return timed


def searches(kind: str, sizes: Sizes, n: int) -> list[dict[str, Any]]:
    """``n`` searches of one kind: prefix, filter, limit (and query), seeded."""
    rng = random.Random(f"{_SEED}-{kind}")
    out = []
    for _ in range(n):
        if kind == NARROW:
            prefix: tuple[str, ...] = ("users", f"u{rng.randrange(sizes.users)}")
            filter_: dict[str, Any] = {"active": True, "score": {"$gte": rng.randrange(900)}}
        else:
            prefix = ("users",)
            filter_ = {"score": {"$gte": 990}, "active": rng.random() < 0.5}
        search: dict[str, Any] = {"filter": filter_, "limit": 10}
        if kind == FIND:
            search = {"query": " ".join(rng.sample(WORDS, 2)), "limit": 10}
        out.append({"namespace_prefix": prefix, **search})
    return out


def _search_side_by_side(stores: Pair, sizes: Sizes, kind: str) -> dict[str, Timed]:
    asked = [
        (s.pop("namespace_prefix"), s) for s in searches(kind, sizes, sizes.warmup + sizes.searches)
    ]
    for prefix, search in asked[: sizes.warmup]:
        for store in stores.values():
            store.search(prefix, **search)
    timed = {name: Timed() for name in stores}
    for i, (prefix, search) in enumerate(asked[sizes.warmup :]):
        answers = {}
        for name in _in_turn(stores, i):
            store = stores[name]
            answers[name] = timed[name].add(lambda s=store, p=prefix, a=search: s.search(p, **a))
        if kind != FIND and len({len(a) for a in answers.values()}) != 1:
            raise RuntimeError(f"{kind}: the stores found different numbers of items")
    return timed


# -- the report --------------------------------------------------------------------------------


def _rate(timed: Timed, count: int) -> float:
    return count / timed.total


def _ms(value: float) -> str:
    return f"{value:,.3f}" if value < 10 else f"{value:,.1f}"


def _rates(sizes: Sizes, put: dict[str, Timed], get: dict[str, Timed]) -> list[str]:
    rows = [
        [label, f"{_rate(t[name], n):,.0f}", name, f"{n:,}"]
        for label, t, n in ((PUT, put, sizes.items), (GET, get, sizes.gets))
        for name in (MEMLANE, SQLITE)
    ]
    return ["", *table(["operation", "per second", "store", "calls"], rows, right={1, 3})]


def _latencies(timed: dict[str, dict[str, Timed]]) -> list[str]:
    rows = [
        [
            kind,
            name,
            _ms(t.median_ms),
            _ms(t.quantile_ms(0.9)),
            _ms(t.quantile_ms(0.99)),
            str(len(t.seconds)),
        ]
        for kind, by_store in timed.items()
        for name, t in by_store.items()
    ]
    header = ["search", "store", "median ms", "p90 ms", "p99 ms", "runs"]
    return ["", *table(header, rows, right={2, 3, 4, 5})]


def _checks(
    sizes: Sizes,
    put: dict[str, Timed],
    get: dict[str, Timed],
    timed: dict[str, dict[str, Timed]],
) -> list[Check]:
    get_ratio = _rate(get[MEMLANE], sizes.gets) / _rate(get[SQLITE], sizes.gets)
    out = [Check(CHECKS[0], f"{get_ratio:.2f}", f"≥ {GET_RATIO:g}", verdict(get_ratio >= 0.2))]
    for kind in SEARCHES:
        m, s = timed[kind][MEMLANE], timed[kind][SQLITE]
        for what, ratio in (
            ("median", m.median_ms / s.median_ms),
            ("p99", m.quantile_ms(0.99) / s.quantile_ms(0.99)),
        ):
            shown = f"{ratio:.2f}"
            out.append(
                Check(
                    f"{kind}: {what} / SqliteStore's",
                    shown,
                    f"≤ {SEARCH_RATIO:g}",
                    verdict(ratio <= SEARCH_RATIO),
                )
            )
    put_ratio = _rate(put[MEMLANE], sizes.items) / _rate(put[SQLITE], sizes.items)
    out.append(Check(CHECKS[-1], f"{put_ratio:.2f}", "", "(info)"))
    return out


def _measure(workdir: Path, sizes: Sizes, quick: bool) -> Report:
    with ExitStack() as stack:
        memlane = _memlane(workdir / "memlane")
        stack.callback(memlane.close)
        stores: Pair = {MEMLANE: memlane, SQLITE: _sqlite(workdir / "sqlite.db", stack)}
        progress(f"langgraph: putting {sizes.items:,} items into each store, in turn")
        put = _puts(stores, sizes)
        progress(f"langgraph: {sizes.gets:,} gets of each, in turn")
        get = _gets(stores, sizes)
        timed = {}
        for kind in SEARCHES:
            progress(f"langgraph: {sizes.searches} searches of each: {kind}")
            timed[kind] = _search_side_by_side(stores, sizes, kind)
        progress(f"langgraph: {sizes.searches} searches with a query, memlane alone")
        timed[FIND] = _search_side_by_side({MEMLANE: memlane}, sizes, FIND)
    report = Report(_title(sizes) + (SMOKE if quick else ""))
    report.lines += _rates(sizes, put, get)
    report.lines += _latencies(timed)
    report.checks += _checks(sizes, put, get, timed)
    report.notes += _notes(sizes)
    return report


def _title(sizes: Sizes) -> str:
    return (
        f"langgraph — {sizes.items:,} items in {sizes.users} namespaces; Python "
        f"{platform.python_version()}, SQLite {sqlite3.sqlite_version}, langgraph-checkpoint-"
        f"sqlite {version('langgraph-checkpoint-sqlite')}, {os.cpu_count()} CPUs"
    )


def _notes(sizes: Sizes) -> list[str]:
    return [
        f"put: batches of {sizes.batch} PutOps, the stores in turn batch by batch; memlane signs "
        "each item's entry and writes it durably (WAL, synchronous=FULL), SqliteStore commits "
        "each batch as SQLite's defaults have it (a rollback journal, synchronous=FULL)",
        "get: random stored keys, one get at a time, blocks of 100 in turn; memlane checks its "
        "token at every call, as docs/langgraph.md says",
        "search: limit 10, newest first; one user's namespace with {active: True, score: "
        "{$gte: r}}, the whole ('users',) with {score: {$gte: 990}, active: b}; query by query "
        "in turn, after warm-up searches; both stores must find as many items",
        "search with a query: memlane's find over ('users',), two of the notes' words; "
        "SqliteStore without an embedder does not rank (information)",
        "get over MCP HTTP: not measured — MCP has no call for an item by namespace and key "
        "(an agent reads items as SRs: docs/langgraph.md §In agents' timelines)",
        f"targets: search without a query ≤ {SEARCH_RATIO:g} × SqliteStore's (median and p99), "
        f"get ≥ {GET_RATIO:g} × SqliteStore's rate",
    ]


def run(*, quick: bool, workdir: Path) -> Report:
    """Both stores fresh in ``workdir``, measured side by side; ``quick`` is a smoke run."""
    return _measure(workdir, QUICK if quick else FULL, quick)
