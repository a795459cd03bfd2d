"""``memlane search status`` and ``memlane search rebuild`` end to end (docs/cli.md,
docs/search.md §The vector index and fusion): the command line (in-process,
tests/node/clikit.py; in a real process on a terminal) on real data directories, wordllama
from its wheel, a closed loopback port for an endpoint that is down."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import pytest_asyncio

from node.node import Node
from tests.node.bundlekit import caller, write
from tests.node.clikit import MEMLANE, count, database, drawn, fails, ok, on_terminal, run

WORDLLAMA = "wordllama:l2_supercat_256@0.4.0.post1"
TITLES = ("gateway rollout", "certificate renewal", "disk alarms")


async def _node_with_srs(data: Path) -> str:
    """A node holding ``TITLES`` as SRs, written with no embedder configured (so nothing is
    queued until one is); a token that reads them."""
    await Node.init(data)
    async with Node.open(data) as node:
        who = await caller(node)
        await write(node, who, *TITLES)
        issued = await node.create_token("alice", "team", ["read:workspace"])
    return issued.token


@pytest_asyncio.fixture
async def data(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "node"
    return path, await _node_with_srs(path)


def configure(data: Path, search: str) -> None:
    (data / "config.toml").write_text(f"[search]\n{search}\n")


def status(data: Path) -> dict[str, object]:
    shown: dict[str, object] = json.loads(ok(run("search", "status", "--data", data, "--json")))
    return shown


def closed_port() -> int:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port: int = closed.getsockname()[1]
    return port


@pytest.mark.asyncio
async def test_without_an_embedder_status_says_bm25_and_rebuild_is_refused(data):
    path, _ = data
    assert ok(run("search", "status", "--data", path)) == (
        "embedder: none: find ranks by BM25 alone\nSRs: 3\n"
    )
    assert status(path) == {
        "embedder": "none",
        "model": None,
        "stored": None,
        "vectors": 0,
        "queued": 0,
        "srs": 3,
        "last_error": None,
    }
    err = fails(run("search", "rebuild", "--data", path))
    assert "no embedder is configured" in err
    assert '[search] embedder = "wordllama"' in err
    assert "docs/search.md" in err
    refused = run("search", "rebuild", "--data", path, "--json")
    assert refused.returncode == 1
    assert "no embedder is configured" in json.loads(refused.stderr)["error"]
    assert count(path, "sr_vector_model") == 0


@pytest.mark.asyncio
@pytest.mark.extra("semantic")
async def test_status_shows_the_queue_and_rebuild_embeds_every_sr(data):
    path, token = data
    configure(path, 'embedder = "wordllama"')
    # Opening under a model queues every SR; status opens the node without the worker.
    assert status(path) == {
        "embedder": "wordllama",
        "model": WORDLLAMA,
        "stored": WORDLLAMA,
        "vectors": 0,
        "queued": 3,
        "srs": 3,
        "last_error": None,
    }
    assert ok(run("search", "status", "--data", path)) == (
        f"embedder: wordllama ({WORDLLAMA})\nvectors: 0 of 3 SRs\n"
        "queued: 3 waiting to be embedded\n"
    )

    rebuilt = run("search", "rebuild", "--data", path)
    assert ok(rebuilt).startswith("embedded 3 SRs in ")
    assert rebuilt.stdout.endswith(f" s: 3 vectors ({WORDLLAMA})\n")
    assert rebuilt.stderr == ""  # no progress line off a terminal
    assert status(path) | {"vectors": 3, "queued": 0} == status(path)
    with database(path) as db:
        assert db.execute("SELECT model FROM sr_vector_model").fetchall() == [(WORDLLAMA,)]
        assert db.execute("SELECT count(*), min(length(vec)) FROM sr_vectors").fetchone() == (
            3,
            256,
        )

    again = json.loads(ok(run("search", "rebuild", "--data", path, "--json")))
    assert set(again) == {"model", "embedded", "vectors", "queued", "seconds"}
    assert (again["model"], again["embedded"], again["vectors"], again["queued"]) == (
        WORDLLAMA,
        3,
        3,
        0,
    )
    assert isinstance(again["seconds"], float)
    found = json.loads(
        ok(run("timeline", "find", "gateway", "--data", path, "--token", token, "--json"))
    )
    assert (found["semantic_used"], found["semantic_pending"]) == (True, 0)
    best = min(found["results"], key=lambda r: r["rank"])
    assert best["title"] == "gateway rollout"


@pytest.mark.asyncio
@pytest.mark.extra("semantic")
async def test_rebuild_shows_its_progress_on_a_terminal(data):
    path, _ = data
    configure(path, 'embedder = "wordllama"\nbatch = 1')  # a step per SR
    code, shown = on_terminal([str(MEMLANE), "search", "rebuild", "--data", str(path)])
    assert code == 0
    assert "0/3" in shown  # the bar knew the whole from the start
    assert drawn(shown, "embed"), shown  # and was drawn to it
    assert status(path)["vectors"] == 3


@pytest.mark.asyncio
async def test_rebuild_against_an_endpoint_that_is_down_fails_clearly(data):
    path, _ = data
    port = closed_port()
    configure(path, f'embedder = "endpoint"\nurl = "http://127.0.0.1:{port}"\nmodel = "m"')
    err = fails(run("search", "rebuild", "--data", path))
    assert (
        f"cannot embed with endpoint:m@127.0.0.1:{port}: http://127.0.0.1:{port} is "
        "unreachable" in err
    )
    assert "the index is unchanged" in err
    refused = run("search", "rebuild", "--data", path, "--json")
    assert refused.returncode == 1
    assert "is unreachable" in json.loads(refused.stderr)["error"]
    tag = f"endpoint:m@127.0.0.1:{port}"
    assert status(path) == {
        "embedder": "endpoint",
        "model": tag,
        "stored": tag,
        "vectors": 0,
        "queued": 3,
        "srs": 3,
        "last_error": None,
    }
