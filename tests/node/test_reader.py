"""The read connection (``node.reader()``): reads that depend on one another run in one hop
on its thread, see what the writer committed, and fail with the store's typed error."""

from __future__ import annotations

from typing import Any

import pytest

from node.errors import StoreError
from node.node import Node
from node.store.reader import Fetch


@pytest.mark.asyncio
async def test_run_reads_in_one_hop_and_fails_typed(node: Node) -> None:
    reader = node.reader()

    def two(fetch: Fetch) -> tuple[Any, Any]:
        count = fetch("SELECT count(*) FROM headers")[0][0]
        first = fetch("SELECT pos FROM headers ORDER BY pos LIMIT ?", (1,))
        return count, first

    count, first = await reader.run(two)
    assert count == await reader.count("headers") > 0
    assert first == [(1,)]
    assert (await reader.fetchall("PRAGMA cache_size"))[0][0] == -16384
    with pytest.raises(StoreError, match="reading the store failed: no such table: nowhere"):
        await reader.run(lambda fetch: fetch("SELECT * FROM nowhere"))
    with pytest.raises(StoreError, match="reading the store failed"):
        await reader.run(lambda fetch: fetch("DELETE FROM headers"))  # the reader only reads
    assert await reader.count("headers") == count
