"""What a tool's handler is handed of the node (``ToolContext``), and the one signature every
handler has (``Handler``): ``await handler(ctx, caller, args)`` → the tool's answer, a
JSON-ready dict, or a ``Refusal`` with the exact text a caller is shown.  Handlers write
through its ``Author`` (``author.py``).

The node builds a context for each call from what it holds at that moment — its writing
identity, its store, the config's profiles and response format, the window guard, the vector
index (None without an embedder), the audit feed's id — so a handler sees the periods and the
index the node has now.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from node.access.callers import Caller
from node.store import Reader, Store
from node.tools.author import Author

if TYPE_CHECKING:  # the guard imports the tool modules; numpy loads only with an embedder
    from node.search.index import VectorIndex
    from node.tools.timeline_spec import Profile
    from node.tools.windows import WindowGuard

__all__ = ["Handler", "ToolContext"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ToolContext:
    """The node as its tools see it: ``author`` writes entries, ``store`` is read by the tools
    that read it whole (``reader()`` and ``now_ms()`` for the rest), ``windows`` files the
    windows of calls to tools with period forms, ``wake`` tells the vector index that SRs
    were written (``written``)."""

    author: Author
    store: Store
    profiles: Mapping[str, Profile]
    response_format: str
    windows: WindowGuard
    vectors: VectorIndex | None
    feed_id: str
    wake: Callable[[], None]

    def reader(self) -> Reader:
        """The store's reads."""
        assert self.store.reader is not None
        return self.store.reader

    def now_ms(self) -> int:
        """This node's moment (ms): what the views' reads count as now."""
        return self.store.now_ms()

    def written(self, answer: T) -> T:
        """SRs were written: the vector index's worker looks at its queue now, not at its
        next poll; ``answer`` is handed back."""
        self.wake()
        return answer


# A tool's handler: the context, the authenticated caller and the arguments as sent (with
# ``turn``, the turn's context, for a tool that declares period forms).
Handler = Callable[[ToolContext, Caller, Mapping[str, Any]], Awaitable[dict[str, Any]]]
