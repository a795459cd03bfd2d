"""A bar chart as inline SVG, drawn on the server (docs/web.md §Pages): one ``<rect>`` per
bar with a ``<title>`` of its slot and count (a browser shows it on hover; no script), the
count axis marked at zero, half and the highest count, and the slot axis labelled at most
``MAX_LABELS`` times.  Colours and lines come from style.css by class (the policy forbids
inline style).  Every piece is a literal ``Markup`` whose ``format`` escapes what it is given,
so a label is text whatever it holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup

__all__ = ["MAX_LABELS", "Bar", "bar_chart"]

MAX_LABELS = 12
_WIDTH, _HEIGHT = 720, 240
_LEFT, _BOTTOM, _TOP = 48, 28, 8
_PLOT_W, _PLOT_H = _WIDTH - _LEFT - 4, _HEIGHT - _BOTTOM - _TOP
_BASE = _TOP + _PLOT_H

_SVG = Markup(
    '<svg class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" '
    'aria-label="{caption}">\n<title>{caption}</title>\n{body}\n</svg>'
)
_RECT = Markup(
    '<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}">'
    "<title>{tip}: {count} {unit}</title></rect>"
)
_LINE = Markup('<line class="axis" x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}"/>')
_TEXT = Markup('<text class="label" x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">{text}</text>')


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar: ``label`` on the slot axis (short), ``tip`` the slot in full, ``count``."""

    label: str
    tip: str
    count: int


def bar_chart(bars: Sequence[Bar], *, caption: str, unit: str = "versions") -> Markup:
    """``bars`` left to right, scaled to the highest count, as one ``<svg>`` element."""
    top = max((b.count for b in bars), default=0)
    step = _PLOT_W / max(len(bars), 1)
    parts = [
        *_count_axis(top),
        *(_bar(i, bar, step, top, unit) for i, bar in enumerate(bars)),
        *_slot_axis(bars, step),
    ]
    return _SVG.format(w=_WIDTH, h=_HEIGHT, caption=caption, body=Markup("\n").join(parts))


def _y(count: int, top: int) -> float:
    return _TOP + _PLOT_H * (1 - count / top) if top else float(_BASE)


def _bar(i: int, bar: Bar, step: float, top: int, unit: str) -> Markup:
    y = _y(bar.count, top)
    return _RECT.format(
        x=_LEFT + i * step + step * 0.1,
        y=y,
        w=step * 0.8,
        h=_BASE - y,
        tip=bar.tip,
        count=bar.count,
        unit=unit,
    )


def _count_axis(top: int) -> list[Markup]:
    """The two axis lines, and the counts marked (0, half, the highest; each once)."""
    lines = [
        _LINE.format(x1=_LEFT, y1=_TOP, x2=_LEFT, y2=_BASE),
        _LINE.format(x1=_LEFT, y1=_BASE, x2=_LEFT + _PLOT_W, y2=_BASE),
    ]
    for mark in sorted({0, top // 2, top}):
        lines.append(_TEXT.format(x=_LEFT - 6, y=_y(mark, top) + 4, anchor="end", text=mark))
    return lines


def _slot_axis(bars: Sequence[Bar], step: float) -> list[Markup]:
    """Every k-th bar's label under it, so that at most ``MAX_LABELS`` show."""
    every = -(-len(bars) // MAX_LABELS) or 1
    return [
        _TEXT.format(x=_LEFT + (i + 0.5) * step, y=_BASE + 18, anchor="middle", text=bar.label)
        for i, bar in enumerate(bars)
        if i % every == 0
    ]
