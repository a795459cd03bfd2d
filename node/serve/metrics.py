"""What ``/metrics`` shows (docs/operations.md §Metrics): the node's counts and its sync, in
the Prometheus text format (version 0.0.4).

Gauges are read when scraped: entries held, logs, entries waiting in the pending area, fork
proofs, the audit feed's newest ``seq``, open connections, discovered nodes and, per peer
node (``PeerTable.nodes``: one series however many connections it has had), whether its link
is up and who dialled it, and its lag; and with an embedder configured, the vector index's
vectors and queue.  Counters count since this process started (Prometheus expects counters
to reset with a restart): entries rejected, fork and clock-skew events (read from the audit
feed past the ``seq`` it had at start, so each scrape reads only what is new), entries
received from and sent to each peer, whose rates are the sync rates, and finds answered by
BM25 alone for want of a query vector.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from node.refusals import REFUSALS
from node.serve.meter import METER
from node.store.audit import AuditEvent

if TYPE_CHECKING:
    from node.mesh.service import SyncService
    from node.node import Node

__all__ = ["Metrics", "Sample", "render"]

_COUNTED: dict[str, str] = {
    AuditEvent.ENTRY_REJECTED.value: "memlane_rejected_entries_total",
    AuditEvent.FORK_DETECTED.value: "memlane_fork_events_total",
    AuditEvent.CLOCK_SKEW.value: "memlane_clock_skew_events_total",
}
_HELP = {
    "memlane_entries": ("gauge", "entries held in the log (every writer)"),
    "memlane_logs": ("gauge", "logs held: one per (writer, epoch)"),
    "memlane_pending_entries": ("gauge", "entries waiting for a gap or their writer's admission"),
    "memlane_pending_bytes": ("gauge", "bytes (headers and payloads) of the entries waiting"),
    "memlane_forks": ("gauge", "fork proofs held"),
    "memlane_audit_seq": ("gauge", "the newest seq of the audit feed"),
    "memlane_rejected_entries_total": ("counter", "entries refused since start"),
    "memlane_fork_events_total": ("counter", "forks detected since start"),
    "memlane_clock_skew_events_total": ("counter", "entries from too far ahead since start"),
    "memlane_sync_running": ("gauge", "1 while sync runs"),
    "memlane_open_connections": ("gauge", "sync connections open"),
    "memlane_discovered_peers": ("gauge", "nodes of this mesh found by zeroconf and dialled"),
    "memlane_peer_connected": ("gauge", "1 while the peer's link is up; connection: who dialled"),
    "memlane_peer_lag_entries": ("gauge", "entries one side held that the other lacked"),
    "memlane_peer_received_entries_total": ("counter", "entries received from a peer"),
    "memlane_peer_sent_entries_total": ("counter", "entries sent to a peer"),
    "memlane_peer_rounds_total": ("counter", "sync rounds completed with a peer"),
    "memlane_search_vectors": ("gauge", "SRs with a vector in the semantic leg's index"),
    "memlane_search_queued": ("gauge", "SRs waiting to be embedded"),
    "memlane_search_fallbacks_total": ("counter", "finds ranked by BM25 alone: no query vector"),
}


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    value: int
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(slots=True)
class Metrics:
    """Collects samples from a node and, while sync runs, its sync service."""

    node: Node
    service: SyncService | None = None
    _seen_seq: int | None = None
    _counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_COUNTED.values(), 0))

    async def start(self) -> None:
        """Counters count from here."""
        self._seen_seq = await self.node.reader().max_audit_seq()

    async def collect(self) -> list[Sample]:
        reader = self.node.reader()
        if self._seen_seq is None:
            await self.start()
        newest = await reader.max_audit_seq()
        counts = await reader.select_audit_counts(gt=self._seen_seq or 0, lte=newest)
        for event, count in counts.items():
            name = _COUNTED.get(event)
            if name is not None:
                self._counts[name] += count
        self._seen_seq = newest
        gauges = [
            Sample("memlane_entries", await reader.max_pos()),
            Sample("memlane_logs", await reader.count("logs")),
            Sample("memlane_pending_entries", await reader.count("pending")),
            Sample("memlane_pending_bytes", await reader.sum_pending_bytes()),
            Sample("memlane_forks", await reader.count("forks")),
            Sample("memlane_audit_seq", newest),
        ]
        counters = [Sample(name, value) for name, value in self._counts.items()]
        return [*gauges, *counters, *await self._search(), *self._sync()]

    async def _search(self) -> list[Sample]:
        """The vector index's samples; none without an embedder (there is no index)."""
        vectors = self.node.vectors
        if vectors is None:
            return []
        status = await vectors.status()
        return [
            Sample("memlane_search_vectors", status.vectors),
            Sample("memlane_search_queued", status.queued),
            Sample("memlane_search_fallbacks_total", vectors.fallbacks),
        ]

    def _sync(self) -> Iterator[Sample]:
        service = self.service
        yield Sample("memlane_sync_running", int(service is not None))
        if service is None:
            return
        yield Sample("memlane_open_connections", service.sync.peers.open_connections)
        yield Sample("memlane_discovered_peers", len(service.discovered))
        for peer in service.sync.peers.nodes():  # one series per peer node, not per record
            if peer.node_id is None:
                continue
            who = ("peer", peer.node_id)
            yield Sample(
                "memlane_peer_connected", int(peer.connected), (who, ("connection", peer.direction))
            )
            yield Sample("memlane_peer_lag_entries", peer.lag_in, (who, ("direction", "in")))
            yield Sample("memlane_peer_lag_entries", peer.lag_out, (who, ("direction", "out")))
            yield Sample("memlane_peer_received_entries_total", peer.received, (who,))
            yield Sample("memlane_peer_sent_entries_total", peer.sent, (who,))
            yield Sample("memlane_peer_rounds_total", peer.rounds, (who,))


def _labels(labels: tuple[tuple[str, str], ...]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render(samples: Iterable[Sample]) -> str:
    """The Prometheus text format: each family's HELP and TYPE once, before its samples."""
    lines: list[str] = []
    described: set[str] = set()
    for sample in sorted(samples, key=lambda s: s.name):
        if sample.name not in described:
            kind, text = _HELP[sample.name]
            lines += [f"# HELP {sample.name} {text}", f"# TYPE {sample.name} {kind}"]
            described.add(sample.name)
        lines.append(f"{sample.name}{_labels(sample.labels)} {sample.value}")
    tools = METER.exposition()  # tool calls (node.serve.meter)
    return "\n".join(lines) + "\n" + REFUSALS.exposition() + tools
