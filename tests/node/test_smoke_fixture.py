"""The fixtures give a working node (a smoke check of the shared helpers)."""

import pytest

from tests.node.helpers import counts


@pytest.mark.asyncio
async def test_foreign_entries_are_stored(node, foreign):
    report = await node.receive(foreign.run(3), source="peer")
    assert report.stored == 3
    # + the authority's member.add of this node and of the foreign writer
    assert (await counts(node))["headers"] == 5
