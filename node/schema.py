"""The store file's schema, composed from its tables' owners (docs/architecture.md §Table
owners): each version's step is the log's statements, the views', the tokens' and the vector
index's, in that order — the order the steps were written in.  Whoever opens the store hands
it ``MIGRATIONS``, as it hands it the views (``node.views.default_views``).
"""

from __future__ import annotations

from node.access.tokens import TOKEN_STEPS
from node.search.schema import INDEX_STEPS
from node.store.schema import LOG_STEPS, compose
from node.views.schema import VIEW_STEPS

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]

# Index i holds the step that takes a store from version i to version i + 1.
MIGRATIONS: tuple[str, ...] = compose(LOG_STEPS, VIEW_STEPS, TOKEN_STEPS, INDEX_STEPS)
SCHEMA_VERSION = len(MIGRATIONS)
