"""``MemlaneRetriever``: a LangChain ``BaseRetriever`` over ``e_timeline``'s find
(docs/langgraph.md §A retriever): the ``k`` SRs most relevant to a query among those its token
can read — every lane, items and agents' SRs alike — as documents, the most relevant first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr

from node.langgraph.loop import NodeThread

__all__ = ["METADATA", "MemlaneRetriever"]

# What a document's metadata holds of its SR (docs/tools/e_timeline.md §Results): ``id`` is its
# sr_id; ``score`` and ``rank`` are find's.
METADATA = (
    "title",
    "tags",
    "lane",
    "content_time",
    "ingest_time",
    "created_time",
    "score",
    "rank",
)


class MemlaneRetriever(BaseRetriever):
    """Documents of the node in ``data_dir`` that ``token`` can read, by find's relevance."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    data_dir: Path
    token: str = Field(repr=False)
    k: int = Field(default=4, ge=1, le=100)  # e_timeline's page_size
    embed: bool = False
    _node: NodeThread = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        del context  # (pydantic's validation context: nothing here uses it)
        self._node = NodeThread(self.data_dir, embed=self.embed)
        try:
            self._node.call(self._node.node.authenticate(self.token))
        except BaseException:
            self._node.close()
            raise

    def close(self) -> None:
        self._node.close()

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        del run_manager  # (callbacks: find reports nothing to them)
        return self._node.call(self._find(query))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        del run_manager
        return await self._node.acall(self._find(query))

    async def _find(self, query: str) -> list[Document]:
        node = self._node.node
        caller = await node.authenticate(self.token)
        found = await node.call("e_timeline", caller, action="find", query=query, page_size=self.k)
        ranked = sorted(found["results"], key=lambda r: int(r["rank"]))
        return [_document(result) for result in ranked]


def _document(result: dict[str, Any]) -> Document:
    metadata = {"id": result["sr_id"]} | {name: result[name] for name in METADATA}
    return Document(page_content=result["text"], metadata=metadata, id=result["sr_id"])
