"""The ingest benchmark's (c): an SR as an ``eventsourcing`` aggregate (v9), apart from
``ingest`` (and, its name starting with ``_``, no benchmark of its own) so that eventsourcing,
the ``bench`` extra's, is imported only when (c) runs."""

from __future__ import annotations

from typing import Any

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate

__all__ = ["Records"]


class _Record(Aggregate):
    """An SR as an event-sourced aggregate: created with its fields (one event)."""

    def __init__(self, title: str, text: str, tags: list[str]) -> None:
        self.title, self.text, self.tags = title, text, tags


class Records(Application):
    def write(self, fields: dict[str, Any]) -> None:
        self.save(_Record(**fields))
