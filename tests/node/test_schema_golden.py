"""The store file's schema is pinned (docs/architecture.md §Table owners, §Schema and
migrations): every step of ``MIGRATIONS`` is composed from its tables' owners, and the schema a
store ends with is the one checked in, ``golden/schema.json`` — each step's SHA-256, the
SHA-256 of the schema each version has, and the whole schema of the newest, row by row
(``type, name, tbl_name, sql`` of ``sqlite_master``), written when the steps were one script in
``node/store/schema.py``.  A new version adds its step's digest and its schema; no older entry
changes, since the steps are history.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from node.node import Node
from node.schema import MIGRATIONS, SCHEMA_VERSION
from node.store import Store
from node.store.connection import Connection
from node.store.schema import migrate
from node.views import default_views

GOLDEN = json.loads((Path(__file__).parent / "golden" / "schema.json").read_text("utf-8"))
DUMP = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"


async def schema(path: Path) -> list[list[Any]]:
    async with await Connection.open(path) as conn:
        return [list(row) for row in await conn.execute_fetchall(DUMP)]


def digest(rows: list[list[Any]]) -> str:
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


async def store_at(path: Path, version: int) -> Path:
    async with await Connection.open(path, isolation_level=None) as conn:
        await migrate(conn, MIGRATIONS, upto=version)
    return path


def test_every_step_is_the_statements_it_was() -> None:
    assert len(GOLDEN["steps"]) == SCHEMA_VERSION
    assert [hashlib.sha256(step.encode()).hexdigest() for step in MIGRATIONS] == GOLDEN["steps"]


@pytest.mark.asyncio
async def test_every_version_has_the_schema_it_had(tmp_path: Path) -> None:
    found = {
        str(v): digest(await schema(await store_at(tmp_path / f"v{v}.db", v)))
        for v in range(1, SCHEMA_VERSION + 1)
    }
    assert found == GOLDEN["versions"]
    assert digest(GOLDEN["schema"]) == GOLDEN["versions"][str(SCHEMA_VERSION)]


@pytest.mark.asyncio
async def test_a_new_node_has_the_schema(tmp_path: Path, wall: Any) -> None:
    await Node.init(tmp_path / "node", wall=wall)
    assert await schema(tmp_path / "node" / "memlane.db") == GOLDEN["schema"]


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(SCHEMA_VERSION))
async def test_a_store_of_every_older_version_opens_to_the_schema(
    tmp_path: Path, wall: Any, version: int
) -> None:
    path = await store_at(tmp_path / "memlane.db", version)
    store = await Store.open(path, wall=wall, views=default_views(), migrations=MIGRATIONS)
    await store.close()
    assert await schema(path) == GOLDEN["schema"]
