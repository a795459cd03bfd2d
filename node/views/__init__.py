"""Views: state derived from the log, one module per view (docs/architecture.md).

``srs`` (the SR fold and its current state), ``episodes``, ``call_windows`` (the rows of
docs/time-windows.md), and the read-only queries of the timeline (``timeline``, ``changes``).
The interface the store calls is ``node.store.views``.
"""

from __future__ import annotations

from node.store.views import AppliedEntry, View
from node.views.call_windows import CallWindowView
from node.views.episodes import EpisodeView
from node.views.srs import SrView

__all__ = ["AppliedEntry", "View", "default_views"]


def default_views() -> tuple[View, ...]:
    """The views a node keeps, in the order they apply each entry."""
    return (SrView(), EpisodeView(), CallWindowView())
