"""The store: the node's log, its local state and the views, in one SQLite file.

Two rooms: ``store.py`` (the ``Store``: open, author, append, state, the views kept with every
append) and ``ingest.py`` (``Ingest``, which holds a ``Store`` and receives entries from
elsewhere into it).  Around them: ``writer.py`` (the single writer's group commit and its
buffered transaction, ``Txn``), ``connection.py`` (SQLite on a thread of its own),
``reader.py`` (reads), ``heads.py``, ``audit.py``, ``pending.py``, ``logbound.py``,
``erasure.py``, ``partial.py``, ``schema.py``, ``views.py`` (what the store asks of a view),
``members.py`` and ``backup.py`` — docs/architecture.md §The store.
"""

from node.store.audit import AuditEvent
from node.store.ingest import Candidate, Ingest, Prechecked, Received, RejectedEntry, Report
from node.store.reader import AuditRow, LogRow, Origin, Reader, StoredEntry
from node.store.store import AuthoredEntry, Content, Store, StoreOptions
from node.store.writer import Txn

__all__ = [
    "AuditEvent",
    "AuditRow",
    "AuthoredEntry",
    "Candidate",
    "Content",
    "Ingest",
    "LogRow",
    "Origin",
    "Prechecked",
    "Reader",
    "Received",
    "RejectedEntry",
    "Report",
    "Store",
    "StoreOptions",
    "StoredEntry",
    "Txn",
]
