"""The semantic benchmark (docs/benchmarks.md §semantic): ``e_timeline find`` with its vector
leg beside find by BM25 alone, on one store of 100,000 SRs.

The store (``--quick``: 2,000 SRs) holds short English work notes made from templates and word
lists, received through memlane's real receive path and then embedded once with wordllama
(``Node.open(embed=False)`` and ``VectorIndex.step`` until the queue is empty); it is cached
under ``.bench-cache/`` like the timeline benchmark's, keyed by a version string holding the
schema and the embedder's model tag.  Both sides are timed on the same open node, through the
tool layer: with the vector leg as configured, and with ``node.vectors`` set to ``None``
around the call — what find does with no embedder configured — so both share one process,
store handle and page cache (and a node opened on the store with no embedder, as the one that
embeds, would drop its index).  The two alternate run by run so a change in the
machine's load falls on both.  Nothing here asserts on speed; the targets are printed, not
enforced.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import itertools
import os
import platform
import random
import re
import sqlite3
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from node.config import CONFIG_FILE
from node.identity import DB_FILE
from node.node import Node
from node.schema import MIGRATIONS, SCHEMA_VERSION
from node.search.embedders import WordLlamaEmbedder
from node.store.reader import READ_CACHE
from node.views.query_terms import STOP_WORDS
from protocol.timefmt import parse_instant
from tests.bench.common import (
    SMOKE,
    Bound,
    Latency,
    Result,
    Stopwatch,
    Writers,
    cached,
    cached_at,
    peak_rss_mib,
    progress,
    receive_batch,
)

__all__ = ["BOUNDS", "FULL", "QUERIES", "QUICK", "Corpus", "Sizes", "build", "run"]

# Query labels, in print order; the smoke test checks that each one is printed.
DECISION = "question: a decision"
INCIDENT = "question: an incident"
PARAPHRASE = "question: in other words"
RARE = "rare term"
COMMON = "common term"
QUERIES = (DECISION, INCIDENT, PARAPHRASE, RARE, COMMON)
TARGET = 2.0  # find with the vector leg ≤ 2 × find by BM25 alone (median latency)
BOUNDS = tuple(Bound(label, "ratio", TARGET, versus="BM25") for label in QUERIES)

# Bump when what the builder writes changes (the schema and the model are in the key already).
BUILD_VERSION = "semantic-store-2"
CONFIG = '[search]\nembedder = "wordllama"\nbatch = 256\n'  # the store's config.toml


@dataclass(frozen=True, slots=True)
class Sizes:
    srs: int = 100_000
    batch: int = 2_000  # entries per node.receive
    runs: int = 30  # timed runs of each side of each query (after the warm-up)
    warmup: int = 3
    name: str = "semantic-100k"


FULL = Sizes()
QUICK = Sizes(srs=2_000, runs=5, warmup=1, name="semantic-2k")

WORKSPACE = "team"
READER = "user07"  # the reading caller: read:workspace, not admin
OWNERS = 50
WRITERS = 4
PRIVATE_SHARE = 0.05
DAY_MS = 86_400_000
START_MS = parse_instant("2024-01-01T00:00:00Z").ms  # ingest times: one year, in the past
SPAN_MS = 365 * DAY_MS
_SEED = 20_250_101
_WORD = re.compile(r"[a-z0-9]+")


def model_tag() -> str:
    """The embedder's model and version exactly: vectors of another would not be these."""
    return WordLlamaEmbedder().model


def cache_key(sizes: Sizes) -> str:
    schema = hashlib.sha256("".join(MIGRATIONS).encode()).hexdigest()[:16]
    return (
        f"{BUILD_VERSION}/schema-{SCHEMA_VERSION}-{schema}/{model_tag()}/srs-{sizes.srs}/"
        f"batch-{sizes.batch}"
    )


# -- the corpus ----------------------------------------------------------------------------
# Work notes as agents of a software team might keep them: 2–5 sentences from templates,
# their slots filled from word lists — flat enough that a question's words are each in a few
# per cent of the notes, not in half of them — plus ticket numbers and versions (many rare
# terms), and codenames drawn Zipf-like (the rarest is the rare-term query).


def _listed(text: str, sep: str | None = None) -> tuple[str, ...]:
    """The items of ``text`` cut at ``sep`` (default: whitespace), stripped."""
    return tuple(item.strip() for item in text.split(sep) if item.strip())


_PEOPLE = _listed("""
Aaron Abigail Adrian Aisha Akira Alice Amara Ana Anders Andrea Anika Ananya Arjun Astrid Aya
Beatriz Ben Bianca Boris Bruno Camila Carlos Carmen Cecile Chen Chiara Chloe Daniel Dana Dmitri
Elena Elif Emeka Emil Emma Enzo Esther Ethan Fatima Farah Felix Fiona Gabriel Grace Gustav Hana
Hassan Helena Hiro Ines Ingrid Isaac Ivan Jamal Jana Javier Jin Jonas Julia Kai Karim Keiko
Kenji Lars Laura Leila Leon Lina Luca Luis Magnus Maya Mei Miguel Mila Nadia Naomi Nikolai Nina
Noah Olga Omar Oscar Paolo Pavel Priya Quinn Rafael Ravi Rosa Ruth Sakura Samir Sara Sven Tara
Theo Tomas Umar Valentina Vera Victor Wei Xavier Ximena Yara Yusuf Zara Zoe Zygmunt
""")
_TEAMS = (
    "platform",
    "billing",
    "search",
    "mobile",
    "data",
    "security",
    "infrastructure",
    "payments",
    "design",
    "support",
    "analytics",
    "release",
    "growth",
    "identity",
    "storage",
    "networking",
    "compliance",
    "frontend",
    "reliability",
    "ml",
    "docs",
    "partner",
    "checkout",
    "observability",
)
_SYSTEMS = _listed(
    """
database, cache, job queue, scheduler, API gateway, load balancer, build server, dashboard,
search indexer, backup job, auth service, message broker, CDN, Kubernetes cluster,
billing service, mobile app, web frontend, metrics pipeline, log shipper, feature flag service,
payment processor, email sender, image resizer, config store, DNS resolver, rate limiter,
session store, report generator, data warehouse, CI runner, object storage, VPN concentrator,
secrets vault, service mesh, tracing collector, alert manager, status page, webhook relay,
invoice generator, tax calculator, fraud scorer, recommendation model, ranking service,
thumbnail cache, video transcoder, upload service, download mirror, package registry,
artifact cache, container registry, deploy pipeline, migration runner, schema registry,
event bus, stream processor, batch scheduler, ETL job, notebook server, GPU pool,
inference server, training cluster, label store, audit logger, permission service,
SSO bridge, LDAP sync, password reset flow, SMS gateway, push service, chat widget,
help center, ticket tracker, wiki, status bot, cron host, NTP servers, bastion host,
firewall rules, edge proxy, TLS terminator, certificate manager, key rotation job,
usage meter, quota service, pricing engine, coupon service, cart service, checkout page,
order database, inventory sync, shipping estimator, address validator, geocoder,
map tiles, timezone service, translation service, spell checker, PDF renderer,
export service, import wizard, sandbox environment, load test rig, chaos tooling,
on-call pager, runbook site, cost dashboard, capacity planner
""",
    ",",
)
_PROBLEMS = _listed(
    """
memory leak, timeout, latency spike, full disk, expired certificate, race condition,
deadlock, slow query, config drift, packet loss, stale cache, failed login, broken link,
flaky test, crash loop, dropped connection, duplicate charge, missing index,
version mismatch, permission error, out-of-memory kill, clock skew, corrupted file,
retry storm, thundering herd, split brain, replication lag, hot partition, noisy neighbour,
connection pool exhaustion, file descriptor leak, zombie process, orphaned volume,
runaway cron, DNS outage, BGP flap, certificate chain error, encoding bug, off-by-one error,
integer overflow, null pointer crash, unhandled exception, silent data loss,
double delivery, message reordering, schema mismatch, unbounded queue, cold start,
cache stampede, lock contention, GC pause, CPU throttling, kernel panic, disk latency,
quota breach, billing mismatch, rounding error, timezone bug, locale bug
""",
    ",",
)
_VERBS = (
    ("migrated", "migrate"),
    ("patched", "patch"),
    ("rolled back", "roll back"),
    ("upgraded", "upgrade"),
    ("reviewed", "review"),
    ("benchmarked", "benchmark"),
    ("restarted", "restart"),
    ("deployed", "deploy"),
    ("refactored", "refactor"),
    ("documented", "document"),
    ("tested", "test"),
    ("profiled", "profile"),
    ("replaced", "replace"),
    ("configured", "configure"),
    ("scaled", "scale"),
    ("audited", "audit"),
    ("split", "split"),
    ("archived", "archive"),
    ("rewrote", "rewrite"),
    ("throttled", "throttle"),
    ("sharded", "shard"),
    ("cleaned up", "clean up"),
    ("pinned", "pin"),
    ("rotated", "rotate"),
    ("monitored", "monitor"),
    ("rebuilt", "rebuild"),
    ("tuned", "tune"),
    ("disabled", "disable"),
    ("re-enabled", "re-enable"),
    ("moved", "move"),
    ("load-tested", "load-test"),
    ("simplified", "simplify"),
    ("decommissioned", "decommission"),
    ("containerised", "containerise"),
)
_WHEN = (
    "on Monday",
    "on Tuesday",
    "on Wednesday",
    "on Thursday",
    "on Friday",
    "yesterday",
    "last week",
    "this morning",
    "before the release",
    "after the outage",
    "during the sprint review",
    "over the weekend",
    "late last night",
    "ahead of the audit",
    "at the end of the quarter",
    "two days ago",
    "during the incident call",
    "right after lunch",
    "before the holidays",
    "in the maintenance window",
    "earlier today",
    "at the planning meeting",
    "after the customer call",
    "during the game day",
    "in January",
    "in March",
    "in June",
    "in September",
    "in November",
)
_WHERE = (
    "production",
    "staging",
    "the Frankfurt region",
    "the Virginia region",
    "the test lab",
    "the Tokyo region",
    "every region",
    "the canary hosts",
    "the Oregon region",
    "the Sydney region",
    "the São Paulo region",
    "the Dublin region",
    "the Singapore region",
    "the on-premise rack",
    "the developer sandbox",
    "the disaster-recovery site",
    "the EU tenant",
    "the US tenant",
    "the shared cluster",
    "the beta fleet",
)
_METRICS = (
    ("p99 latency", "ms"),
    ("error rate", "percent"),
    ("memory use", "MB"),
    ("queue depth", "jobs"),
    ("build time", "minutes"),
    ("cost", "dollars a day"),
    ("disk use", "GB"),
    ("request rate", "requests per second"),
    ("cache hit ratio", "percent"),
    ("CPU load", "percent"),
    ("cold start time", "seconds"),
    ("replication lag", "seconds"),
    ("signup conversion", "percent"),
    ("churn", "accounts a week"),
    ("page weight", "KB"),
    ("test duration", "minutes"),
    ("open tickets", "tickets"),
    ("deploy frequency", "deploys a day"),
)
_TOPICS = _listed(
    """
data retention, on-call rotation, pricing tiers, accessibility, GDPR requests,
the onboarding flow, offline mode, single sign-on, dark mode, search ranking,
invoice exports, rate limits, audit logs, backup restores, API versioning,
push notifications, two-factor login, usage quotas, schema migrations, the public roadmap,
hiring plans, the security review, vendor contracts, SOC 2 evidence, the status page wording,
incident reviews, error budgets, capacity forecasts, the holiday freeze, localisation,
right-to-left layouts, screen readers, keyboard shortcuts, the mobile redesign, tablet support,
webhooks, bulk imports, CSV exports, SAML setup, SCIM provisioning, IP allow lists,
data residency, encryption at rest, key management, password policies, session timeouts,
refund handling, chargebacks, annual billing, free trials, seat-based pricing,
partner integrations, the plugin API, the command-line tool, SDK releases, deprecations,
the changelog, release notes, feature flags, experiment results, A/B tests, the churn survey,
customer interviews, the support backlog, documentation gaps, training material,
the design system, colour contrast, font loading, image formats, caching headers,
HTTP/3, IPv6, WebSocket limits, long polling, batch APIs, pagination, idempotency keys
""",
    ",",
)
_COMPANIES = _listed("""
Acme Globex Initech Umbrella Hooli Vandelay Stark Wayne Tyrell Soylent Cyberdyne Wonka Aperture
Massive Oscorp Gringotts Monarch Nakatomi Piper Prestige Virtucon Weyland Yoyodyne
Zorg Bluth Dunder Gekko Kramerica Sterling Ollivander Duff Krusty Nimbus Sunco Buymore
Cogswell Spacely Ewing Omni Octan Rekall Sirius Tessier Veidt Wolfram Zenith Altavista Borealis
""")
_CODENAMES = _listed("""
heron juniper quartz falcon lantern meadow cobalt ember harbor willow granite orchid sparrow
tundra velvet saffron beacon cinder glacier hollow ivory jasper kestrel lotus marble nimbus
onyx pebble quill raven sable thistle umber vortex wren yarrow zephyr acorn bramble cypress
dune fennel garnet hazel indigo kelp lichen mistral nettle opal pumice quince rowan sorrel
tansy ursa vetch wisteria xenon yucca zinnia alder birch cedar dogwood elm fir ginkgo hawthorn
ilex jacaranda kapok larch maple nutmeg olive poplar redwood spruce teak walnut basalt chert
dolomite feldspar gypsum jade kyanite lapis mica obsidian pyrite rutile schist talc zircon
albatross bittern curlew dunlin egret finch grebe hoopoe ibis jackdaw kite lapwing merlin
nightjar osprey plover quail rook siskin tern veery warbler
""")
_ADVERBS = (
    "gradually",
    "in smaller batches",
    "behind a feature flag",
    "region by region",
    "with a dry run first",
    "in one maintenance window",
    "one tenant at a time",
    "with a rollback plan",
    "during off-peak hours",
    "after a design review",
    "with two reviewers",
    "without downtime",
    "in a sandbox first",
)
_TICKETS = ("INC", "OPS", "SEC", "BILL", "PLAT", "DATA", "MOB", "SUP")

_TEMPLATES = (
    "{person} {did} the {system} in {where} {when}.",
    "The {team} team reported a {problem} in the {system} {when}.",
    "We decided to {do} the {system} before the next release because of the {problem}.",
    "Project {codename} needs a new {system} for the {team} team.",
    "{person} thinks the {problem} comes from the {system}, not the {system2}.",
    "Next step: {do} the {system} and check the {metric} again.",
    "The {metric} of the {system} went from {n} to {m} {unit} after the change.",
    "Customer {company} asked about {topic} and {topic2}.",
    "Meeting notes: {person} and {person2} discussed {topic} for project {codename}.",
    "Open question: should the {team} team own the {system}?",
    "The fix for the {problem} was merged {when}; {person} will watch the {metric}.",
    "Read a write-up on {topic}; the idea is to {do} the {system} {adverb}.",
    "{person} {did} the {system} {adverb} and saw no {problem} since.",
    "Postmortem {ticket}: a {problem} in the {system} took down {topic} for {n} minutes.",
    "Decision: project {codename} will {do} the {system} {adverb}, owned by {person}.",
    "The {team} team wants {topic} done before project {codename} ships.",
    "Ticket {ticket} tracks the {problem} that {company} hit in {where}.",
    "Version {version} of the {system} fixes the {problem} {person} found {when}.",
    "{company} will renew if {topic} is ready; {person2} is their contact.",
    "{person} asked the {team} team to {do} the {system2} {adverb}.",
    "Budget note: the {system} costs about {n} dollars a month in {where}.",
    "Handover: {person2} now owns {topic}; see {ticket} for the history.",
    "The {metric} alarm on the {system} fired {when} and cleared on its own.",
    "Idea from {person}: {do} the {system} so that {topic} gets simpler.",
)


def _pick(rng: random.Random, items: tuple[Any, ...], s: float) -> Any:
    """An item of ``items``, the k-th about k^−s as often as the first."""
    return rng.choices(items, cum_weights=_cumulative(len(items), s))[0]


@functools.cache
def _cumulative(n: int, s: float) -> list[float]:
    return list(itertools.accumulate(1.0 / (k + 1) ** s for k in range(n)))


def _sentence(rng: random.Random) -> str:
    did, do = rng.choice(_VERBS)
    metric, unit = rng.choice(_METRICS)
    n = rng.randint(2, 900)
    slots = {
        "person": rng.choice(_PEOPLE),
        "person2": rng.choice(_PEOPLE),
        "team": rng.choice(_TEAMS),
        "system": _pick(rng, _SYSTEMS, 0.6),
        "system2": _pick(rng, _SYSTEMS, 0.6),
        "problem": _pick(rng, _PROBLEMS, 0.6),
        "did": did,
        "do": do,
        "when": rng.choice(_WHEN),
        "where": rng.choice(_WHERE),
        "metric": metric,
        "unit": unit,
        "n": n,
        "m": max(1, n + rng.randint(-n + 1, n)),
        "topic": rng.choice(_TOPICS),
        "topic2": rng.choice(_TOPICS),
        "company": rng.choice(_COMPANIES),
        "codename": _pick(rng, _CODENAMES, 1.0),
        "adverb": rng.choice(_ADVERBS),
        "ticket": f"{rng.choice(_TICKETS)}-{rng.randint(100, 9999)}",
        "version": f"{rng.randint(1, 9)}.{rng.randint(0, 40)}.{rng.randint(0, 20)}",
    }
    return rng.choice(_TEMPLATES).format(**slots)


def note_text(rng: random.Random) -> str:
    """2–5 sentences, 20–60 words."""
    while True:
        text = " ".join(_sentence(rng) for _ in range(rng.randint(2, 5)))
        if 20 <= len(text.split()) <= 60:
            return text


@dataclass(frozen=True, slots=True)
class Corpus:
    """The deterministic content of the store: SR ``i`` is a function of ``i`` and a seeded
    generator walked in order."""

    n: int

    def wall(self, i: int) -> int:
        return START_MS + i * SPAN_MS // self.n

    def sr_id(self, i: int) -> str:
        value = self.wall(i) << 80 | 0x7 << 76 | 0b10 << 62 | i
        h = f"{value:032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def payloads(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """(wall, sr.put payload) of every SR, in order."""
        rng = random.Random(_SEED)
        for i in range(self.n):
            text = note_text(rng)
            title = " ".join(text.split()[: rng.randint(3, 8)]).rstrip(".,;:?")
            payload: dict[str, Any] = {
                "sr_id": self.sr_id(i),
                "workspace": WORKSPACE,
                "principal": f"user{rng.randrange(OWNERS):02d}",
                "create": True,
                "title": title,
                "text": text,
                "tags": list(dict.fromkeys(rng.choices(_TEAMS, k=rng.randint(1, 3)))),
                "content_time": self.wall(i) - rng.randrange(7 * DAY_MS),
            }
            if rng.random() < PRIVATE_SHARE:
                payload["visibility"] = "private"
            yield self.wall(i), payload


# -- building the store --------------------------------------------------------------------


async def _receive(path: Path, sizes: Sizes) -> dict[str, Any]:
    """Initialise a node at ``path`` and receive every SR, sealed by ``WRITERS`` foreign
    writers for its mesh; the word counts and the reader's token."""
    info = await Node.init(path)
    corpus = Corpus(sizes.srs)
    writers = Writers(info.mesh, WRITERS, 0x60)
    word_df: Counter[str] = Counter()
    receive_s = 0.0
    async with Node.open(path) as node:
        for key in writers.keys:
            await node.membership.admit_member(key.public)
        issued = await node.create_token(READER, WORKSPACE, ("read:workspace",))
        batch: list[tuple[bytes, bytes | None]] = []
        for i, (wall, payload) in enumerate(corpus.payloads()):
            word_df.update(set(_WORD.findall(f"{payload['title']} {payload['text']}".lower())))
            batch.append(writers.sealed(i, wall, payload))
            if len(batch) == sizes.batch or i == corpus.n - 1:
                receive_s += await receive_batch(node, batch)
                batch = []
                if (i + 1) % 20_000 == 0:
                    progress(f"semantic: received {i + 1:,} of {corpus.n:,} SRs")
    return {"token": issued.token, "receive_s": receive_s, "word_df": dict(word_df)}


async def _embed(path: Path) -> dict[str, Any]:
    """Open the node with its embedder named (every SR is queued) and embed the queue in the
    foreground, batch by batch."""
    (path / CONFIG_FILE).write_text(CONFIG)
    steps = 0
    async with Node.open(path, embed=False) as node:
        index = node.vectors
        assert index is not None, "the store's config.toml names an embedder"
        queued = (await index.status()).queued
        with Stopwatch() as sw:
            while await index.step():
                steps += 1
                if steps % 100 == 0:
                    progress(f"semantic: embedded {steps * index.batch:,} of {queued:,} SRs")
        status = await index.status()
    if status.queued or status.vectors != queued:
        raise RuntimeError(f"embedded {status.vectors} of {queued}, {status.queued} left queued")
    return {
        "embed_s": sw.seconds,
        "vectors": status.vectors,
        "embed_batch": index.batch,
        "model": status.model,
    }


async def _build(path: Path, sizes: Sizes) -> dict[str, Any]:
    started = time.perf_counter()
    meta = await _receive(path, sizes)
    received = time.perf_counter() - started
    meta |= await _embed(path)
    return meta | {
        "srs": sizes.srs,
        "receive_build_s": received,
        "build_s": time.perf_counter() - started,
        "build_rss_mib": peak_rss_mib(),
    }


def _build_in_child(directory: str, sizes: Sizes) -> dict[str, Any]:
    return asyncio.run(_build(Path(directory) / "node", sizes))


def build(sizes: Sizes) -> tuple[Path, dict[str, Any], bool]:
    """The cached store for ``sizes``: its node directory, its metadata, whether it was
    built now."""
    root, meta, built = cached(
        sizes.name, cache_key(sizes), f"embedded store of {sizes.srs:,} SRs", _build_in_child, sizes
    )
    return root / "node", meta, built


# -- the queries -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Query:
    label: str
    text: str


def _queries(word_df: dict[str, int], n: int) -> list[Query]:
    """Three questions as an agent would ask them, the rarest codename, and the word nearest
    to 10 % of SRs."""
    names = [c for c in _CODENAMES if word_df.get(c)]
    rare = min(names, key=lambda c: (word_df[c], c))
    plain = [w for w in word_df if w.isalpha() and w not in STOP_WORDS]
    common = min(plain, key=lambda w: (abs(word_df[w] - n // 10), w))
    return [
        Query(DECISION, "What did we decide about migrating the database?"),
        Query(INCIDENT, "Why did the API gateway keep timing out after the release?"),
        Query(PARAPHRASE, "who looked into payments being charged twice"),
        Query(RARE, rare),
        Query(COMMON, common),
    ]


def _args(text: str) -> dict[str, Any]:
    # shed_idf_noise off: its share counts cost both sides alike and would only dilute the
    # ratio (docs/benchmarks.md §timeline); everything else at its default (a page of 20).
    return {"action": "find", "query": text, "shed_idf_noise": False}


@dataclass(slots=True)
class Said:
    """What the vector leg's answers said: how many, and how many fell back or waited."""

    answers: int = 0
    unused: int = 0
    pending: int = 0


async def _timed(
    semantic: Callable[[], Awaitable[int]], bm25: Callable[[], Awaitable[int]], sizes: Sizes
) -> tuple[list[float], list[float], int, int]:
    """Warm both up, then alternate them run by run (which goes first alternates too)."""
    got = base_got = 0
    for _ in range(sizes.warmup):
        got, base_got = await semantic(), await bm25()
    seconds: list[float] = []
    baseline: list[float] = []
    for i in range(sizes.runs):
        for side in (0, 1) if i % 2 == 0 else (1, 0):
            t0 = time.perf_counter()
            if side == 0:
                got = await semantic()
            else:
                base_got = await bm25()
            (seconds if side == 0 else baseline).append(time.perf_counter() - t0)
    return seconds, baseline, got, base_got


async def _parts(node: Node, text: str, runs: int) -> tuple[float, float]:
    """Median ms of the vector leg's two parts outside find: the query's vector, and the
    nearest 100 held vectors."""
    index = node.vectors
    assert index is not None
    embed, near = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        vector = await index.query(text)
        t1 = time.perf_counter()
        index.nearest(vector)(100)
        near.append(time.perf_counter() - t1)
        embed.append(t1 - t0)
    return statistics.median(embed) * 1000, statistics.median(near) * 1000


async def _measure(path: Path, meta: dict[str, Any], sizes: Sizes, result: Result) -> None:
    raw = sqlite3.connect(f"file:{path / DB_FILE}?mode=ro", uri=True)
    raw.execute(READ_CACHE)
    said = Said()
    parts: list[str] = []
    async with Node.open(path, embed=False) as node:  # the store's config.toml: wordllama
        index = node.vectors
        assert index is not None, "the store's config.toml names an embedder"
        assert index.held is not None, "the store was embedded"
        status = await index.status()
        with Stopwatch() as loading:  # the model loads on the first embedding, not in a find
            await index.query("warm up")
        caller = await node.authenticate(meta["token"])
        assert caller.has("read:workspace")
        assert not caller.is_admin
        for q in _queries(meta["word_df"], sizes.srs):
            progress(f"semantic: {q.label}")

            async def semantic(text: str = q.text) -> int:
                answer = await node.e_timeline(caller, **_args(text))
                said.answers += 1
                said.unused += not answer["semantic_used"]
                said.pending += answer["semantic_pending"] > 0
                return len(answer["results"])

            async def bm25(text: str = q.text) -> int:
                node.vectors = None  # find as with no embedder: BM25 alone
                try:
                    answer = await node.e_timeline(caller, **_args(text))
                finally:
                    node.vectors = index
                assert "semantic_used" not in answer
                return len(answer["results"])

            seconds, base, got, base_got = await _timed(semantic, bm25, sizes)
            df = raw.execute(
                "SELECT count(*) FROM sr_fts WHERE sr_fts MATCH ?",
                (
                    " OR ".join(
                        f'"{w}"' for w in _WORD.findall(q.text.lower()) if w not in STOP_WORDS
                    ),
                ),
            ).fetchone()[0]
            note = f"{q.text!r}: {got} results (BM25 {base_got}); {df:,} SRs hold a term"
            result.latencies.append(Latency(q.label, tuple(seconds), tuple(base), note=note))
            embed_ms, near_ms = await _parts(node, q.text, sizes.runs)
            parts.append(f"{q.label} {embed_ms:.2f} + {near_ms:.2f}")
        held = len(index.held)
    raw.close()
    result.notes += [
        f"index: {status.model}, {status.vectors:,} vectors stored, {status.queued} queued; "
        f"{held:,} held in memory (float32, {held * 256 * 4 / 2**20:,.0f} MiB); the model "
        f"loaded in {loading.seconds:.1f} s, before the first find",
        f"vector leg answers: {said.answers:,}, of which {said.unused} fell back to BM25 "
        f"(semantic_used false) and {said.pending} had semantic_pending > 0",
        "vector leg outside find, median ms (the query's vector + its 100 nearest held "
        f"vectors): {'; '.join(parts)}",
    ]


def run(*, quick: bool, workdir: Path) -> Result:
    """Build (or reuse) the cached embedded store, then time every query both ways."""
    del workdir  # the store is cached outside the run's temporary directory
    sizes = QUICK if quick else FULL
    path, meta, built = build(sizes)
    smoke = SMOKE if quick else ""
    result = Result(
        f"semantic — find with the vector leg beside BM25 alone, {sizes.srs:,} SRs, Python "
        f"{platform.python_version()}, SQLite {sqlite3.sqlite_version}, {os.cpu_count()} "
        f"CPUs{smoke}",
        bounds=list(BOUNDS),
        baseline="BM25",
    )
    asyncio.run(_measure(path, meta, sizes, result))
    how, where = cached_at(path, built)
    result.notes[:0] = [
        f"store {how} ({where}): {meta['srs']:,} SRs received in {meta['receive_s']:,.0f} s, "
        f"embedded in {meta['embed_s']:,.1f} s ({meta['vectors'] / meta['embed_s']:,.0f} SRs/s, "
        f"batches of {meta['embed_batch']}); {meta['build_s']:,.0f} s in all, the builder's "
        f"peak RSS {meta['build_rss_mib']:,.0f} MiB",
        f"reader: {READER}, read:workspace on {WORKSPACE!r} (not admin); find with "
        "shed_idf_noise off, page size 20; BM25 = the same call with node.vectors set to None",
        "ms = milliseconds per find; ratio = median / BM25 median; the two alternate run by "
        "run after a warm-up",
    ]
    return result
