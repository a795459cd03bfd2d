"""What the node refused because a limit was reached, counted per limit for ``/metrics``
(docs/operations.md §Limits): ``memlane_limit_refusals_total{limit="..."}``.

The labels are bounded: ``limit`` is a name of ``LIMITS``, each at zero from the start so a
rate is defined before the first refusal.  The counts are the process's (counters restart with
it), in ``REFUSALS``; ``render`` in ``node.serve.metrics`` appends them to what ``/metrics``
answers.
"""

from __future__ import annotations

__all__ = ["LIMITS", "REFUSALS", "Refusals"]

# One name per limit of docs/operations.md §Limits that refuses something at run time.
LIMITS = (
    "writer_logs",  # a log opened past its writer's max_logs: rejected, or one dropped
    "frame_cost",  # a sync frame holds more objects or depth than its message type allows
    "sync_connections",  # every sync slot is taken
    "sync_per_key",  # one node key holds max_connections_per_key connections
    "sync_pre_handshake",  # max_handshakes sync connections are in their TLS handshake
    "sync_per_address",  # one address holds max_handshakes_per_address of them
    "sync_handshake_timeout",  # a sync connection's handshake took handshake_timeout
    "sync_handshake_evicted",  # the oldest sync connection in its handshake gave its slot
    "join_pre_handshake",  # the join port's connections in their handshake (16)
    "join_per_address",  # one address holds 4 of them
    "join_handshake_timeout",  # a join connection's handshake took 10 s
    "join_handshake_evicted",  # the oldest join connection in its handshake gave its slot
    "join_slots",  # every join slot (max_joins) is taken
    "join_idle",  # a join connection sent no request within read_timeout
    "join_evicted",  # the oldest join connection without a request gave its slot to a newcomer
    "discovery_evicted",  # a discovered node unlinked for evict_after gave its place
    "mcp_body_bytes",  # an MCP HTTP body over max_body_bytes
    "mcp_json_shape",  # an MCP HTTP body nests or counts beyond max_json_depth / _values
    "mcp_sessions_per_token",  # one token holds max_sessions_per_token sessions
    "pending_full",  # pending_limit entries wait
    "pending_bytes",  # pending_bytes bytes wait
    "pending_source_quota",  # one source holds its share: pending_per_source, of the bytes too
    "mcp_connections",  # max_connections MCP HTTP connections are open
    "mcp_header_timeout",  # an MCP HTTP connection sent no request head within header_timeout
    "web_connections",  # max_connections web view connections are open
    "web_header_timeout",  # a web view connection sent no request head within header_timeout
    "health_connections",  # the health port's 16 connections are open
)

_NAME = "memlane_limit_refusals_total"


class Refusals:
    """The counts of one process, per limit."""

    def __init__(self, limits: tuple[str, ...]) -> None:
        self._counts = dict.fromkeys(limits, 0)

    def count(self, limit: str) -> None:
        """One refusal by ``limit`` (a name of ``LIMITS``; another is a programming error)."""
        self._counts[limit] += 1

    def get(self, limit: str) -> int:
        return self._counts[limit]

    def exposition(self) -> str:
        lines = [f"# HELP {_NAME} what a limit refused, per limit", f"# TYPE {_NAME} counter"]
        lines += [f'{_NAME}{{limit="{name}"}} {n}' for name, n in sorted(self._counts.items())]
        return "\n".join(lines) + "\n"


REFUSALS = Refusals(LIMITS)
