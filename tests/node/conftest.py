"""Fixtures: real nodes in temporary directories, real SQLite files, a controllable wall."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from node.access.callers import Caller
from node.config import ENVIRONMENT
from node.node import Node
from tests.extras import need
from tests.node.clikit import make_token, ok, run
from tests.node.embedserver import EmbedServer, reference_model
from tests.node.helpers import CallerFactory, ForeignWriter, Wall, admit


@pytest.fixture(autouse=True)
def _quiet_serving(monkeypatch: pytest.MonkeyPatch) -> None:
    """``memlane serve`` processes started by a test answer health on a free port and leave
    zeroconf alone unless the test says otherwise (``--discovery on``, ``--health-listen``);
    nothing of the environment running the tests configures them."""
    for name in (*ENVIRONMENT, "MEMLANE_CONFIG", "MEMLANE_DATA", "MEMLANE_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMLANE_HEALTH", "127.0.0.1:0")
    monkeypatch.setenv("MEMLANE_DISCOVERY", "off")


@pytest.fixture
def wall() -> Wall:
    return Wall()


@pytest_asyncio.fixture
async def node_dir(tmp_path: Path, wall: Wall) -> Path:
    await Node.init(tmp_path / "node", wall=wall)
    return tmp_path / "node"


@pytest_asyncio.fixture
async def node(node_dir: Path, wall: Wall) -> AsyncIterator[Node]:
    async with Node.open(node_dir, wall=wall) as opened:
        yield opened


@pytest.fixture
def make_caller(node: Node) -> CallerFactory:
    async def make(
        principal: str = "alice",
        workspace: str = "team",
        scopes: tuple[str, ...] = ("read:workspace", "write:workspace"),
    ) -> Caller:
        issued = await node.create_token(principal, workspace, scopes)
        return await node.authenticate(issued.token)

    return make


@pytest_asyncio.fixture
async def foreign(node: Node) -> ForeignWriter:
    """Another node's log, its writer admitted to the node's mesh."""
    writer = ForeignWriter(node.info.mesh)
    await admit(node, writer)
    return writer


@pytest.fixture(scope="module")
def _embed_server() -> Iterator[EmbedServer]:
    need("semantic")  # its vectors are wordllama's
    server = EmbedServer(reference_model())
    yield server
    server.close()


@pytest.fixture
def embed_server(_embed_server: EmbedServer) -> Iterator[EmbedServer]:
    """A real OpenAI-compatible embeddings server on loopback (tests/node/embedserver.py),
    reset before and after each test (which releases a hanging answer)."""
    _embed_server.reset()
    yield _embed_server
    _embed_server.reset()


@pytest.fixture
def auth(tmp_path: Path) -> list[str]:
    """The flags that reach a new node, made with the command line (in-process,
    tests/node/clikit.py), as a reader and writer of workspace team (the CLI tests' common
    start)."""

    data = tmp_path / "node"
    ok(run("init", "--data", data))
    token = make_token(data, "read:workspace", "write:workspace")
    return ["--data", str(data), "--token", token]
