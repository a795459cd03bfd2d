"""The log's contract (tests/node/store_contract.py) run against the SQLite store on real
files: as a node opens it by default, with per-entry verification and one operation a batch
(the same verdicts and the same logs, reached the other way), and with the writer's
connection in a child process."""

from __future__ import annotations

from node.store import StoreOptions
from tests.node.store_contract import StoreContract


class TestStore(StoreContract):
    def options(self) -> StoreOptions:
        return StoreOptions()


class TestStorePerEntry(StoreContract):
    def options(self) -> StoreOptions:
        return StoreOptions(amortised_verification=False, max_batch=1)
