"""Tool calls counted per tool and surface, for ``/metrics`` (docs/operations.md §Health and
metrics): calls, refusals and a latency histogram, in the Prometheus text format (0.0.4).

A surface is the transport that carried the call — ``stdio`` (``memlane mcp``) or ``http``
(``memlane serve``) — named by the server that answers it (``node.mcp.server``).  Labels are
bounded: ``tool`` is a name of the catalog, ``surface`` one of ``SURFACES``; a call naming no
tool of the catalog is counted apart, per surface, without its name.  A surface's series exist
from the moment a server for it is built, every tool at zero, so a rate is defined before the
first call.

The counts are the process's (as Prometheus expects of counters: they restart with it), in
``METER``; ``render`` in ``node.serve.metrics`` appends them to what ``/metrics`` answers.  A
server built without a surface — a client in the same process — is not counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from node.tools.catalog import CATALOG

__all__ = ["BUCKETS", "METER", "SURFACES", "ToolMeter"]

SURFACES = ("stdio", "http")
# Upper bounds in seconds: a read answers in milliseconds, a find over a large store or a
# write waiting for its group commit in tens to hundreds, a call held up in seconds.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

_CALLS = "memlane_tool_calls_total"
_REFUSALS = "memlane_tool_refusals_total"
_SECONDS = "memlane_tool_call_seconds"
_UNKNOWN = "memlane_tool_unknown_calls_total"
_FAMILIES = (
    (_CALLS, "counter", "tool calls answered, per tool and surface"),
    (_REFUSALS, "counter", "tool calls answered with a refusal (isError), per tool and surface"),
    (_SECONDS, "histogram", "seconds from a tool call's arrival to its answer"),
    (_UNKNOWN, "counter", "calls naming no tool of the catalog, per surface"),
)


@dataclass(slots=True)
class _Series:
    calls: int = 0
    refusals: int = 0
    seconds: float = 0.0
    under: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))  # per bucket, not summed


class ToolMeter:
    """The counts of one process, per (tool, surface)."""

    def __init__(self, tools: Sequence[str]) -> None:
        self.tools = tuple(tools)
        self._series: dict[tuple[str, str], _Series] = {}
        self._unknown: dict[str, int] = {}

    def serve(self, surface: str) -> None:
        """A server for ``surface`` exists: its series start, every tool at zero."""
        if surface not in SURFACES:
            raise ValueError(f"unknown surface {surface!r}")
        for tool in self.tools:
            self._series.setdefault((tool, surface), _Series())
        self._unknown.setdefault(surface, 0)

    def record(self, surface: str, tool: str, seconds: float, *, refused: bool) -> None:
        """One call answered in ``seconds``, refused or not."""
        if surface not in self._unknown:
            self.serve(surface)
        series = self._series.get((tool, surface))
        if series is None:
            self._unknown[surface] += 1
            return
        series.calls += 1
        series.refusals += int(refused)
        series.seconds += seconds
        for i, bound in enumerate(BUCKETS):
            if seconds <= bound:
                series.under[i] += 1
                break

    def exposition(self) -> str:
        """The text of every family with series; empty while no server was built."""
        if not self._unknown:
            return ""
        lines: list[str] = []
        for name, kind, text in _FAMILIES:
            lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
            lines += self._samples(name)
        return "\n".join(lines) + "\n"

    def _samples(self, name: str) -> Iterable[str]:
        if name == _UNKNOWN:
            return [f'{name}{{surface="{s}"}} {n}' for s, n in sorted(self._unknown.items())]
        out: list[str] = []
        for (tool, surface), series in sorted(self._series.items(), key=_by_surface):
            labels = f'tool="{tool}",surface="{surface}"'
            if name == _CALLS:
                out.append(f"{name}{{{labels}}} {series.calls}")
            elif name == _REFUSALS:
                out.append(f"{name}{{{labels}}} {series.refusals}")
            else:
                out += _histogram(name, labels, series)
        return out


def _by_surface(item: tuple[tuple[str, str], _Series]) -> tuple[str, str]:
    (tool, surface), _ = item
    return surface, tool


def _histogram(name: str, labels: str, series: _Series) -> list[str]:
    """Cumulative buckets, then ``+Inf``, the sum and the count (Prometheus histograms)."""
    lines, below = [], 0
    for bound, n in zip(BUCKETS, series.under, strict=True):
        below += n
        lines.append(f'{name}_bucket{{{labels},le="{bound:g}"}} {below}')
    lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {series.calls}')
    lines.append(f"{name}_sum{{{labels}}} {_number(series.seconds)}")
    lines.append(f"{name}_count{{{labels}}} {series.calls}")
    return lines


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


METER = ToolMeter([spec.name for spec in CATALOG])
