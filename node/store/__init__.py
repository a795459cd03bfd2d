"""The store: the log, local state, and the views, in one SQLite file."""

from node.store.audit import AuditEvent
from node.store.core import StoreOptions
from node.store.reader import AuditRow, LogRow, Origin, Reader, StoredEntry
from node.store.received import Checked, Received, Report
from node.store.sealing import Authored
from node.store.store import Store
from node.store.txn import Txn

__all__ = [
    "AuditEvent",
    "AuditRow",
    "Authored",
    "Checked",
    "LogRow",
    "Origin",
    "Reader",
    "Received",
    "Report",
    "Store",
    "StoreOptions",
    "StoredEntry",
    "Txn",
]
