"""find's semantic leg (docs/search.md §The vector index and fusion), on real nodes with the
embedded wordllama model and a real OpenAI-compatible endpoint on loopback.

The vector leg ranks only what the caller can read; an SR not yet embedded ranks by BM25
alone and is counted in ``semantic_pending``; deletion, undeletion and correction reach it; a
model change rebuilds the index; two nodes holding the same entries answer alike; an
endpoint that is down or slow leaves the answer to BM25 and the answer says so; and the
embedded model answers with no network at all.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from node.config import NodeConfig
from node.node import Node
from node.search.embedders import WordLlamaEmbedder
from protocol.clock import Hlc
from tests.node.embedserver import EmbedServer
from tests.node.helpers import ForeignWriter, Wall, admit, sr_payload
from tests.node.offline import offline_or_skip, run_offline

REPO = Path(__file__).resolve().parents[2]
WORDLLAMA = {"search": {"embedder": "wordllama"}}
WORDLLAMA_TAG = "wordllama:l2_supercat_256@0.4.0.post1"
TEXTS = {
    "kitten": "My kitten sleeps all day on the sofa",
    "replica": "Postgres replica lag during the nightly backup",
    "dog": "The dog fetched the ball in the park",
    "certs": "TLS certificates expire next week",
    "budget": "Quarterly budget spreadsheet for the finance team",
}
READ_WRITE = ("read:workspace", "write:workspace")


@asynccontextmanager
async def opened(
    path: Path, wall: Wall, search: dict[str, Any], **options: Any
) -> AsyncIterator[Node]:
    if not (path / "memlane.db").exists():
        await Node.init(path, wall=wall)
    config = NodeConfig.from_mapping(search)
    async with Node.open(path, wall=wall, config=config, **options) as node:
        yield node


async def embed_all(node: Node) -> None:
    """Embed the queue in the foreground (a node opened with ``embed=False``)."""
    assert node.vectors is not None
    while await node.vectors.step():
        pass


async def settle(node: Node) -> None:
    """Let the background worker empty the queue."""
    assert node.vectors is not None
    node.vectors.wake()
    await asyncio.wait_for(node.vectors.settled(), 60)


def names(answer: dict[str, Any], ids: dict[str, str]) -> list[str]:
    """The answer's SRs by name, in rank order."""
    by_id = {v: k for k, v in ids.items()}
    return [by_id[r["sr_id"]] for r in sorted(answer["results"], key=lambda r: r["rank"])]


@pytest.mark.asyncio
@pytest.mark.extra("semantic")
async def test_the_vector_leg_follows_embedding_deletion_and_correction(
    tmp_path: Path, wall: Wall
) -> None:
    async with opened(tmp_path / "n", wall, WORDLLAMA, embed=False) as node:
        issued = await node.create_token("alice", "team", READ_WRITE)
        alice = await node.authenticate(issued.token)
        ids = {}
        for name, text in TEXTS.items():
            wall.now += 1000
            ids[name] = (await node.e_write(alice, text=text))["sr_id"]

        async def ask(query: str) -> dict[str, Any]:
            return await node.e_timeline(alice, action="find", query=query)

        # Nothing embedded yet: BM25 alone, which knows no "cat" — and the answer says so.
        before = await ask("cat napping")
        assert (before["results"], before["semantic_used"], before["semantic_pending"]) == (
            [],
            True,
            5,
        )
        await embed_all(node)
        found = await ask("cat napping")
        assert found["semantic_pending"] == 0
        assert names(found, ids)[0] == "kitten"
        assert len(found["results"]) == 5  # the vector leg ranks every SR it holds
        assert names(await ask("database replication delay"), ids)[0] == "replica"
        # BM25 and vectors fused: "kitten" is found by both legs, first either way.
        assert names(await ask("kitten"), ids)[0] == "kitten"
        # Deleted here: gone from the vector leg too; undeleted: back, not embedded again.
        await node.e_delete(alice, sr_id=ids["kitten"])
        assert "kitten" not in names(await ask("cat napping"), ids)
        await node.e_undelete(alice, sr_id=ids["kitten"])
        assert names(await ask("cat napping"), ids)[0] == "kitten"
        assert node.vectors is not None
        assert (await node.vectors.status()).queued == 0
        # Corrected: its old vector is not used while the new text waits to be embedded.
        wall.now += 1000
        await node.e_correct(
            alice, sr_id=ids["kitten"], text="Invoices and accounting notes", reason="wrong note"
        )
        waiting = await ask("cat napping")
        assert waiting["semantic_pending"] == 1
        assert "kitten" not in names(waiting, ids)
        await embed_all(node)
        assert names(await ask("money and accounting"), ids)[:2] == ["kitten", "budget"] or (
            names(await ask("money and accounting"), ids)[:2] == ["budget", "kitten"]
        )
        assert names(await ask("cat napping"), ids)[0] != "kitten"


@pytest.mark.asyncio
@pytest.mark.extra("semantic")
async def test_another_model_rebuilds_the_index_and_none_drops_it(
    tmp_path: Path, wall: Wall, embed_server: EmbedServer
) -> None:
    path = tmp_path / "n"
    async with opened(path, wall, WORDLLAMA, embed=False) as node:
        issued = await node.create_token("alice", "team", READ_WRITE)
        alice = await node.authenticate(issued.token)
        for text in TEXTS.values():
            wall.now += 1000
            await node.e_write(alice, text=text)
        await embed_all(node)
        by_wordllama = await node.e_timeline(alice, action="find", query="cat napping")
    served = {"search": {"embedder": "endpoint", "url": embed_server.url, "model": "l2_supercat"}}
    async with opened(path, wall, served, embed=False) as node:  # a one-shot command's open
        assert node.vectors is not None
        status = await node.vectors.status()
        assert status.model.startswith("endpoint:l2_supercat@127.0.0.1:")
        assert (status.stored, status.vectors) == (WORDLLAMA_TAG, 5)  # left alone
        asked = await node.e_timeline(alice, action="find", query="cat napping")
        assert (asked["results"], asked["semantic_used"]) == ([], False)
        assert "memlane search rebuild" in asked["semantic_error"]
    async with opened(path, wall, served) as node:  # the node that embeds: made anew
        assert node.vectors is not None
        status = await node.vectors.status()
        assert status.stored == status.model
        assert status.vectors < 5  # dropped, every SR queued again (embedding has begun)
        await settle(node)
        # The endpoint serves wordllama's vectors: the rebuilt index answers as the first.
        assert await node.e_timeline(alice, action="find", query="cat napping") == by_wordllama
        assert embed_server.received, "the endpoint was asked"
    async with opened(path, wall, {}, embed=False) as node:  # no embedder, one-shot: kept
        reader = node.reader()
        assert await reader.scalar("SELECT count(*) FROM sr_vectors") == 5
    async with opened(path, wall, {}) as node:
        assert node.vectors is None
        reader = node.reader()
        for table in ("sr_vectors", "sr_embed_queue", "sr_vector_model"):
            assert await reader.scalar(f"SELECT count(*) FROM {table}") == 0, table


def corpus(writer: ForeignWriter, rng: random.Random, *, hidden: bool) -> list[Any]:
    """SR entries in workspace "team": 24 readable by every reader, and — with ``hidden`` —
    8 private to carol and 8 in another workspace, interleaved, sharing words."""
    words = (
        "cat",
        "kitten",
        "sofa",
        "dog",
        "park",
        "ball",
        "postgres",
        "replica",
        "backup",
        "budget",
        "finance",
        "invoice",
        "certificate",
        "tls",
        "expiry",
        "garden",
    )
    entries = []
    for n in range(40):
        kind = "public" if n % 5 < 3 else ("private" if n % 5 == 3 else "elsewhere")
        text = " ".join(rng.choices(words, k=rng.randint(3, 9)))
        if kind != "public" and not hidden:
            continue
        fields: dict[str, Any] = {"text": text, "principal": "carol"}
        if kind == "private":
            fields["visibility"] = "private"
        workspace = "other" if kind == "elsewhere" else "team"
        sr_id = f"0190b000-0000-7000-8000-{n:012d}"
        entries.append(
            writer.next(
                "sr.put", sr_payload(sr_id, workspace, **fields), hlc=Hlc(BASE + n * 1000, 0)
            )
        )
    return entries


BASE = 1_789_000_000_000
QUERIES = ("cat on the sofa", "database backups", "money", "garden party", "tls")


async def answers(node: Node, who: Any) -> list[dict[str, Any]]:
    out = []
    for query in QUERIES:
        for page in (1, 2, 3):
            out.append(
                await node.e_timeline(who, action="find", query=query, page=page, page_size=8)
            )
    return out


@pytest.mark.asyncio
@pytest.mark.extra("semantic")
async def test_what_a_caller_cannot_read_changes_nothing_the_vector_leg_ranks(
    tmp_path: Path, wall: Wall
) -> None:
    """The differential test of docs/authority.md with the vector leg on: one node holds
    hidden SRs (carol's private ones, another workspace's, and two deleted here), the other
    never had them; alice's answers are the same, page by page, score by score."""
    got = []
    for hidden in (True, False):
        rng = random.Random(5)
        async with opened(tmp_path / f"n{hidden}", wall, WORDLLAMA, embed=False) as node:
            writer = ForeignWriter(node.info.mesh, wall=wall.now - 100_000)
            await admit(node, writer)
            entries = corpus(writer, rng, hidden=hidden)
            if hidden:  # two more, deleted here
                for n in (90, 91):
                    sr_id = f"0190b000-0000-7000-8000-{n:012d}"
                    payload = sr_payload(sr_id, text="cat sofa money")
                    entries.append(writer.next("sr.put", payload, hlc=Hlc(BASE + n * 1000, 0)))
            assert (await node.receive(entries, source="peer")).stored == len(entries)
            admin = await node.authenticate(
                (
                    await node.create_token("root", "team", ("read:workspace", "admin:workspace"))
                ).token
            )
            if hidden:
                for n in (90, 91):
                    await node.e_delete(admin, sr_id=f"0190b000-0000-7000-8000-{n:012d}")
            await embed_all(node)
            alice = await node.authenticate(
                (await node.create_token("alice", "team", ("read:workspace",))).token
            )
            got.append(await answers(node, alice))
    rich, poor = got
    assert rich == poor
    assert all(a["semantic_used"] and a["semantic_pending"] == 0 for a in rich)
    assert sum(len(a["results"]) for a in rich) == len(QUERIES) * 24  # all pages, all readable


@pytest.mark.asyncio
@pytest.mark.extra("semantic")
async def test_two_nodes_with_the_same_entries_answer_alike(tmp_path: Path, wall: Wall) -> None:
    got = []
    for n, shuffled in enumerate((False, True)):
        async with opened(tmp_path / f"n{n}", wall, WORDLLAMA) as node:
            writers = [
                ForeignWriter(node.info.mesh, seed=bytes([s]) * 32, wall=wall.now - 10**5)
                for s in (3, 4)
            ]
            await admit(node, *writers)
            seeded = zip((1, 2), writers, strict=True)
            logs = [corpus(w, random.Random(s), hidden=True) for s, w in seeded]
            batches = [log[i : i + 7] for log in logs for i in range(0, len(log), 7)]
            if shuffled:  # the other order, log by log kept in seq order
                batches = [log[i : i + 5] for log in logs[::-1] for i in range(0, len(log), 5)]
            for batch in batches:
                await node.receive(batch, source="peer")
            await settle(node)
            alice = await node.authenticate(
                (await node.create_token("alice", "team", ("read:workspace",))).token
            )
            got.append(await answers(node, alice))
    assert got[0] == got[1]
    assert all(a["semantic_pending"] == 0 for a in got[0])


@pytest.mark.asyncio
@pytest.mark.extra("semantic")
async def test_find_answers_from_bm25_when_the_endpoint_is_slow_or_down(
    tmp_path: Path, wall: Wall, embed_server: EmbedServer
) -> None:
    served = {
        "search": {
            "embedder": "endpoint",
            "url": embed_server.url,
            "model": "l2_supercat",
            "timeout": "1s",
        }
    }
    async with opened(tmp_path / "n", wall, served, embed=False) as node:
        alice = await node.authenticate(
            (await node.create_token("alice", "team", READ_WRITE)).token
        )
        for text in TEXTS.values():
            wall.now += 1000
            await node.e_write(alice, text=text)
        await embed_all(node)
        assert node.vectors is not None
        fused = await node.e_timeline(alice, action="find", query="replica backup")
        assert fused["semantic_used"] is True
        assert len(fused["results"]) == 5
        embed_server.hang = True  # slow: the query's vector does not come within the timeout
        started = time.monotonic()
        slow = await node.e_timeline(alice, action="find", query="replica backup")
        assert time.monotonic() - started < 2.0
        assert (slow["semantic_used"], slow["semantic_pending"]) == (False, 0)
        assert "1 s" in slow["semantic_error"]
        assert [r["text"] for r in slow["results"]] == [TEXTS["replica"]]  # BM25's answer
        assert node.vectors.fallbacks == 1
        embed_server.reset()
    gone = {"search": served["search"] | {"url": _closed_port_url()}}  # (another endpoint:
    async with opened(tmp_path / "n", wall, gone) as node:  # its index is made anew)
        assert node.vectors is not None
        started = time.monotonic()
        down = await node.e_timeline(alice, action="find", query="replica backup")
        assert time.monotonic() - started < 1.0  # refused at once, not waited for
        assert down["semantic_used"] is False
        assert down["semantic_error"] == "the embedder is unavailable (the node's log says why)"
        assert "127.0.0.1" not in json.dumps(down)  # the endpoint is the operator's business
        assert [r["text"] for r in down["results"]] == [TEXTS["replica"]]
        assert node.vectors.fallbacks == 1


def _closed_port_url() -> str:
    """A loopback URL nothing listens at (the port was free a moment ago)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


_CHILD = """
import asyncio, json, sys
from pathlib import Path
from node.config import NodeConfig
from node.node import Node
from protocol.clock import Hlc

async def main(path):
    await Node.init(path)
    config = NodeConfig.from_mapping({"search": {"embedder": "wordllama"}})
    async with Node.open(path, config=config) as node:
        alice = await node.authenticate((await node.create_token(
            "alice", "team", ("read:workspace", "write:workspace"))).token)
        for text in json.loads(sys.argv[2]):
            await node.e_write(alice, text=text)
        node.vectors.wake()
        await asyncio.wait_for(node.vectors.settled(), 60)
        answer = await node.e_timeline(alice, action="find", query="cat napping")
        best = min(answer["results"], key=lambda r: r["rank"])
        print(json.dumps({"used": answer["semantic_used"], "pending": answer["semantic_pending"],
                          "best": best["text"], "results": len(answer["results"])}))

asyncio.run(main(Path(sys.argv[1])))
"""


@pytest.mark.extra("semantic")
def test_the_embedded_model_finds_with_the_network_cut(tmp_path: Path) -> None:
    offline_or_skip()
    done = run_offline(
        "-c", _CHILD, str(tmp_path / "n"), json.dumps(list(TEXTS.values())), cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "used": True,
        "pending": 0,
        "best": TEXTS["kitten"],
        "results": 5,
    }


@pytest.mark.asyncio
@pytest.mark.extra("semantic")
async def test_fused_ranks_and_scores_match_a_reference(tmp_path: Path, wall: Wall) -> None:
    """The fusion against its definition: BM25 ranks from a node holding the same entries
    with no embedder, vector ranks from wordllama's own vectors as stored (round(127 · v)),
    competition ranks, (1 − w)/(60 + BM25 rank) + w/(60 + vector rank), ties by sr_id."""
    rng = random.Random(3)
    words = ("cat", "kitten", "dog", "park", "postgres", "backup", "budget", "invoice", "tls")
    texts = [" ".join(rng.choices(words, k=rng.randint(2, 6))) for _ in range(30)]
    texts += texts[:3]  # exact copies: ties in both legs
    sr_ids = [f"0190c000-0000-7000-8000-{n:012d}" for n in range(len(texts))]
    got = {}
    for name, search in (
        ("fused", {"search": {"embedder": "wordllama", "fusion_weight": 0.3}}),
        ("bm25", {}),
    ):
        async with opened(tmp_path / name, wall, search, embed=False) as node:
            writer = ForeignWriter(node.info.mesh, wall=BASE)
            await admit(node, writer)
            entries = [
                writer.next("sr.put", sr_payload(sr_ids[n], text=t), hlc=Hlc(BASE + n, 0))
                for n, t in enumerate(texts)
            ]
            await node.receive(entries, source="peer")
            if node.vectors is not None:
                await embed_all(node)
            alice = await node.authenticate(
                (await node.create_token("alice", "team", ("read:workspace",))).token
            )
            got[name] = {
                q: (await node.e_timeline(alice, action="find", query=q, page_size=100))["results"]
                for q in ("cat in the park", "invoice budget", "tls")
            }
    vectors = await WordLlamaEmbedder().embed(texts)
    stored = np.clip(np.rint(vectors * 127), -127, 127).astype(np.int8).astype(np.int64)
    for query, fused in got["fused"].items():
        bm25 = {r["sr_id"]: r["score"] for r in got["bm25"][query]}
        q = np.clip(np.rint((await WordLlamaEmbedder().embed([query]))[0] * 127), -127, 127)
        sims = dict(zip(sr_ids, (stored @ q.astype(np.int64)).tolist(), strict=True))
        score = dict.fromkeys(sr_ids, 0.0)
        for sr_id in sr_ids:
            if sr_id in bm25:
                score[sr_id] += 0.7 / (60 + 1 + sum(s > bm25[sr_id] for s in bm25.values()))
            score[sr_id] += 0.3 / (60 + 1 + sum(s > sims[sr_id] for s in sims.values()))
        expected = sorted(sr_ids, key=lambda s: (-score[s], s))
        ranked = sorted(fused, key=lambda r: r["rank"])
        assert [r["sr_id"] for r in ranked] == expected, query
        assert [r["score"] for r in ranked] == [round(score[s], 6) for s in expected], query


@pytest.mark.asyncio
@pytest.mark.extra("semantic")
async def test_an_erased_srs_vector_goes_with_it_and_a_rebuild_keeps_the_others(
    tmp_path: Path, wall: Wall
) -> None:
    async with opened(tmp_path / "n", wall, WORDLLAMA, embed=False) as node:
        alice = await node.authenticate(
            (await node.create_token("alice", "team", READ_WRITE)).token
        )
        ids = {
            name: (await node.e_write(alice, text=text))["sr_id"] for name, text in TEXTS.items()
        }
        await embed_all(node)

        async def vectors() -> set[str]:
            return {r[0] for r in await node.reader().fetchall("SELECT sr_id FROM sr_vectors")}

        assert await vectors() == set(ids.values())
        await node.e_erase(alice, sr_id=ids["kitten"], reason="asked to be forgotten")
        assert await vectors() == set(ids.values()) - {ids["kitten"]}
        found = await node.e_timeline(alice, action="find", query="cat napping")
        assert ids["kitten"] not in [r["sr_id"] for r in found["results"]]
        await node.rebuild_views()
        assert await vectors() == set(ids.values()) - {ids["kitten"]}
