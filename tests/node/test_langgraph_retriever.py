"""``MemlaneRetriever`` (docs/langgraph.md §A retriever): find's most relevant SRs as LangChain
documents — an agent's SRs and the store's items alike — with their ids, titles, tags, times
and scores, sync and async, under the token's read rule.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.extras import need

need("langgraph", module=True)

from node.errors import Unauthenticated  # noqa: E402
from node.langgraph import MemlaneRetriever, MemlaneStore  # noqa: E402
from node.node import Node  # noqa: E402
from tests.node.langgraphkit import issue, make_node  # noqa: E402


@pytest.fixture
def data(tmp_path: Path) -> Path:
    data = make_node(tmp_path / "node")
    (token,) = issue(data, ["team"])
    asyncio.run(_write(data, token))
    with MemlaneStore(data, token) as store:
        store.put(("notes",), "tea", {"text": "green tea after lunch, oolong at night"})
    return data


async def _write(data: Path, token: str) -> None:
    async with Node.open(data) as node:
        caller = await node.authenticate(token)
        await node.e_write(caller, title="Tea", text="tea tea tea: oolong", tags=["drinks"])
        await node.e_write(caller, title="Coffee", text="espresso, and a little tea")
        await node.e_write(caller, title="Lunch", text="soup")


@pytest.fixture
def retriever(data: Path) -> Iterator[MemlaneRetriever]:
    (token,) = issue(data, ["team"], "bob", ["read:workspace"])
    opened = MemlaneRetriever(data_dir=data, token=token, k=2)
    yield opened
    opened.close()


def test_the_most_relevant_srs_come_as_documents(retriever: MemlaneRetriever) -> None:
    docs = retriever.invoke("tea")
    assert [d.metadata["title"] for d in docs] == ["Tea", "tea"]  # k = 2 of three that hold it
    first = docs[0]
    assert first.page_content == "tea tea tea: oolong"
    assert first.id == first.metadata["id"]
    assert first.metadata["tags"] == ["drinks"]
    assert first.metadata["lane"] == "default"
    assert first.metadata["rank"] == 1
    assert first.metadata["score"] > docs[1].metadata["score"] > 0
    assert first.metadata["ingest_time"].endswith("Z")
    assert docs[1].metadata["lane"] == "langgraph"  # an item, its envelope as the text
    assert '"key":"tea"' in docs[1].page_content
    assert asyncio.run(retriever.ainvoke("tea")) == docs
    assert retriever.invoke("nothing holds this word") == []
    assert retriever.token not in repr(retriever)  # a secret stays out of logs


def test_a_token_sees_only_its_workspace(data: Path) -> None:
    (other,) = issue(data, ["elsewhere"], "bob", ["read:workspace"])
    elsewhere = MemlaneRetriever(data_dir=data, token=other)
    try:
        assert elsewhere.invoke("tea") == []
    finally:
        elsewhere.close()
    with pytest.raises(Unauthenticated):
        MemlaneRetriever(data_dir=data, token="mlt_" + "x" * 43)
