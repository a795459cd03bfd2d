"""The embedders of the semantic leg (node/search/embedders.py, docs/search.md): wordllama
from the files in its wheel, in process and in a network namespace with no network; the
endpoint embedder against a real OpenAI-compatible server on loopback (tests/node/
embedserver.py) — its vectors, its key, a server that is down, slow or answers nonsense; and
the ``[search]`` configuration."""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from node.config import InvalidConfig, NodeConfig, SearchConfig
from node.errors import ConfigError, EmbedderError, EmbedderUnavailable
from node.search.embedders import (
    _PAD_BUDGET,
    EndpointEmbedder,
    NoEmbedder,
    WordLlamaEmbedder,
    _padded_chunks,
    make_embedder,
    unit_rows,
)
from tests.node.embedserver import EmbedServer
from tests.node.offline import offline_or_skip, run_offline

TEXTS = [
    "The cat sat on the warm mat by the fire.",
    "A kitten was resting on the rug near the fireplace.",
    "Quarterly tax filings are due at the end of the month.",
    "The build failed because a dependency was missing from the lock file.",
]
LONG = "a long text about the mesh and its sync sessions " * 4000  # 200 kB: a run alone
REPO = Path(__file__).resolve().parents[2]


def _sha(vectors: np.ndarray) -> str:
    return hashlib.sha256(vectors.tobytes()).hexdigest()


# wordllama, in process


@pytest.mark.asyncio
@pytest.mark.extra("semantic")
async def test_wordllama_embeds_from_its_wheel():
    embedder = WordLlamaEmbedder()
    assert (embedder.model, embedder.dim) == ("wordllama:l2_supercat_256@0.4.0.post1", 256)
    vectors = await embedder.embed(TEXTS)
    assert (vectors.shape, vectors.dtype) == ((4, 256), np.float32)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    similar, unrelated = vectors[0] @ vectors[1], vectors[0] @ vectors[2]
    assert similar > unrelated + 0.2
    assert (vectors[3] @ vectors[2]) < similar
    again = await WordLlamaEmbedder().embed(TEXTS)
    assert again.tobytes() == vectors.tobytes()  # deterministic, to the byte
    await embedder.aclose()


@pytest.mark.asyncio
@pytest.mark.extra("semantic")
async def test_a_texts_vector_does_not_depend_on_its_batch():
    embedder = WordLlamaEmbedder()
    alone = await embedder.embed(TEXTS[:1])
    batched = await embedder.embed([LONG, TEXTS[0], "", " \n\t", *TEXTS[1:]])
    assert batched[1].tobytes() == alone[0].tobytes()
    assert not batched[2].any()  # blank: zero rows, not NaN
    assert not batched[3].any()
    assert abs(float(np.linalg.norm(batched[0])) - 1.0) < 1e-6
    empty = await embedder.embed([])
    assert empty.shape == (0, 256)
    with pytest.raises(TypeError):
        await embedder.embed("one string")  # type: ignore[arg-type]


@pytest.mark.asyncio
@pytest.mark.extra("semantic")
async def test_wordllama_loads_and_embeds_off_the_event_loop():
    embedder = WordLlamaEmbedder()
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.002)
            ticks += 1

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    before = ticks
    await embedder.embed(TEXTS * 200)  # the first call loads the model too
    during = ticks - before
    ticker.cancel()
    assert during > 0  # the loop ran while the model loaded and embedded


@pytest.mark.asyncio
async def test_without_the_wordllama_package_the_hint_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "wordllama", None)  # `import wordllama` fails
    with pytest.raises(EmbedderUnavailable, match=r"pip install 'memlane\[semantic\]'"):
        await WordLlamaEmbedder().embed(TEXTS)


def test_runs_for_the_model_are_bounded_by_their_padded_size():
    small, big = "x" * 999, "y" * (_PAD_BUDGET + 10)
    texts = [small] * 200 + [big] + [small] * 3
    runs = list(_padded_chunks(texts))
    assert runs[0] == (0, _PAD_BUDGET // 1000)
    assert (200, 201) in runs
    assert [i for lo, hi in runs for i in range(lo, hi)] == list(range(len(texts)))
    for lo, hi in runs:
        assert hi - lo == 1 or (hi - lo) * max(len(t) + 1 for t in texts[lo:hi]) <= _PAD_BUDGET
    assert list(_padded_chunks([])) == []


# wordllama with the network cut

CHILD = """
import asyncio, hashlib, json, logging, socket, sys
from node.search.embedders import WordLlamaEmbedder

async def main():
    embedder = WordLlamaEmbedder()
    return embedder.model, await embedder.embed(json.loads(sys.argv[1]))

model, vectors = asyncio.run(main())
print(json.dumps({"interfaces": sorted(name for _, name in socket.if_nameindex()),
                  "model": model, "shape": list(vectors.shape), "dtype": str(vectors.dtype),
                  "root_handlers": len(logging.getLogger().handlers),
                  "sha256": hashlib.sha256(vectors.tobytes()).hexdigest()}))
"""


@pytest.mark.extra("semantic")
def test_wordllama_loads_and_embeds_with_no_network():
    offline_or_skip()
    done = run_offline("-c", CHILD, json.dumps(TEXTS), cwd=REPO)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["interfaces"] == ["lo"]  # a namespace with loopback alone: nowhere to go
    here = asyncio.run(WordLlamaEmbedder().embed(TEXTS))
    # root_handlers: wordllama's import calls logging.basicConfig, which the embedder undoes
    assert shown == {
        "interfaces": ["lo"],
        "model": "wordllama:l2_supercat_256@0.4.0.post1",
        "shape": [4, 256],
        "dtype": "float32",
        "sha256": _sha(here),
        "root_handlers": 0,
    }


# the endpoint embedder against a real server


def _endpoint(embed_server: EmbedServer, **options: Any) -> EndpointEmbedder:
    return EndpointEmbedder(embed_server.url, "l2_supercat", **options)


@pytest.mark.asyncio
@pytest.mark.parametrize("delimit", ["length", "chunked", "close"])
async def test_the_endpoint_answers_wordllamas_vectors(embed_server, delimit):
    embed_server.delimit = delimit
    endpoint = _endpoint(embed_server, batch=2)
    port = embed_server.url.rsplit(":", 1)[1]
    assert (endpoint.model, endpoint.dim) == (f"endpoint:l2_supercat@127.0.0.1:{port}", None)
    vectors = await endpoint.embed([TEXTS[0], "  ", *TEXTS[1:]])
    assert (vectors.shape, vectors.dtype, endpoint.dim) == ((5, 256), np.float32, 256)
    own = await WordLlamaEmbedder().embed(TEXTS)
    np.testing.assert_allclose(vectors[[0, 2, 3, 4]], own, atol=1e-6)
    assert not vectors[1].any()  # the blank text was not sent
    sent = [r["body"] for r in embed_server.received]
    assert sent == [
        {"model": "l2_supercat", "input": TEXTS[:2]},
        {"model": "l2_supercat", "input": TEXTS[2:]},
    ]
    assert embed_server.received[0]["authorization"] is None
    await endpoint.aclose()


@pytest.mark.asyncio
async def test_the_key_files_bearer_token_is_sent(embed_server, tmp_path):
    embed_server.key = "mlk-test-0123"
    (tmp_path / "key").write_text("  mlk-test-0123\n")
    vectors = await _endpoint(embed_server, key_file=tmp_path / "key").embed(TEXTS[:1])
    assert vectors.shape == (1, 256)
    assert embed_server.received[-1]["authorization"] == "Bearer mlk-test-0123"
    (tmp_path / "wrong").write_text("mlk-wrong-9999\n")
    with pytest.raises(EmbedderUnavailable, match=r"HTTP 401\): check search.key_file") as raised:
        await _endpoint(embed_server, key_file=tmp_path / "wrong").embed(TEXTS[:1])
    assert "mlk-wrong-9999" not in str(raised.value)
    with pytest.raises(EmbedderUnavailable, match=r"it wants a key: set search\.key_file"):
        await _endpoint(embed_server).embed(TEXTS[:1])


def test_a_key_file_that_is_missing_empty_or_not_one_token_is_a_config_error(tmp_path):
    url = "http://127.0.0.1:9"
    with pytest.raises(ConfigError, match=r"search\.key_file: cannot read .*No such file"):
        EndpointEmbedder(url, "m", key_file=tmp_path / "absent")
    for content in ["", " \n", "two words", "line\nbreak"]:
        (tmp_path / "key").write_text(content)
        with pytest.raises(ConfigError, match="must hold one key") as raised:
            EndpointEmbedder(url, "m", key_file=tmp_path / "key")
        assert content.strip() == "" or content not in str(raised.value)


@pytest.mark.asyncio
async def test_a_down_endpoint_fails_fast():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(EmbedderUnavailable, match=f"http://127.0.0.1:{port} is unreachable"):
        await EndpointEmbedder(f"http://127.0.0.1:{port}", "m").embed(TEXTS[:1])
    assert time.monotonic() - started < 2.0


@pytest.mark.asyncio
async def test_a_slow_endpoint_fails_within_its_timeout(embed_server):
    embed_server.hang = True
    started = time.monotonic()
    with pytest.raises(EmbedderUnavailable, match=r"did not answer within 0.3 s"):
        await _endpoint(embed_server, timeout=0.3).embed(TEXTS[:1])
    assert 0.25 <= time.monotonic() - started < 2.0  # (a loop timer may fire a tick early)
    assert len(embed_server.received) == 1  # it was asked, and never answered in time


def _drop_one(answer: dict[str, Any]) -> dict[str, Any]:
    return {**answer, "data": answer["data"][1:]}


def _short_row(answer: dict[str, Any]) -> dict[str, Any]:
    answer["data"][0]["embedding"] = answer["data"][0]["embedding"][:100]
    return answer


def _index_twice(answer: dict[str, Any]) -> dict[str, Any]:
    answer["data"][0]["index"] = answer["data"][1]["index"]
    return answer


def _strings(answer: dict[str, Any]) -> dict[str, Any]:
    answer["data"][0]["embedding"] = [str(x) for x in answer["data"][0]["embedding"]]
    return answer


def _nan(answer: dict[str, Any]) -> dict[str, Any]:
    answer["data"][0]["embedding"][0] = float("nan")  # (json.dumps writes NaN)
    return answer


MALFORMED = [
    ("raw", b"<html>busy</html>", "did not answer a JSON object"),
    ("raw", b"[1, 2]", "did not answer a JSON object"),
    ("raw", b'{"embeddings": []}', "answered no embeddings for 2 texts"),
    ("tamper", _drop_one, "answered 1 embeddings for 2 texts"),
    ("tamper", _short_row, "not lists of numbers of one length"),
    ("tamper", _index_twice, "indices other than 0 to 1"),
    ("tamper", _strings, "not lists of numbers of one length"),
    ("tamper", _nan, "not finite"),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("how", "what", "said"), MALFORMED)
async def test_a_malformed_answer_is_refused(embed_server, how, what, said):
    setattr(embed_server, how, what)
    with pytest.raises(EmbedderUnavailable, match=said):
        await _endpoint(embed_server).embed(TEXTS[:2])


@pytest.mark.asyncio
@pytest.mark.parametrize("delimit", ["length", "chunked", "close"])
async def test_an_answer_too_big_is_refused(embed_server, delimit):
    embed_server.delimit = delimit
    with pytest.raises(EmbedderUnavailable, match="answered more than 4096 bytes"):
        await _endpoint(embed_server, max_response=4096).embed(TEXTS[:2])
    vectors = await _endpoint(embed_server, max_response=16384).embed(TEXTS[:1])  # ~6 kB passes
    assert vectors.shape == (1, 256)


@pytest.mark.asyncio
async def test_an_error_status_says_what_the_server_said(embed_server):
    embed_server.status, embed_server.raw = 404, b'{"error": "model \\"l2_supercat\\" not found"}'
    with pytest.raises(EmbedderUnavailable, match=r'HTTP 404 Not Found: model "l2_supercat"'):
        await _endpoint(embed_server).embed(TEXTS[:1])


@pytest.mark.asyncio
async def test_vectors_that_change_length_are_refused(embed_server):
    endpoint = _endpoint(embed_server)
    await endpoint.embed(TEXTS[:1])
    embed_server.tamper = _short_row
    with pytest.raises(EmbedderUnavailable, match="100-d vectors where it had answered 256-d"):
        await endpoint.embed(TEXTS[:1])


@pytest.mark.asyncio
async def test_a_path_prefix_is_kept(embed_server):
    endpoint = EndpointEmbedder(embed_server.url + "/prefix/", "l2_supercat")
    with pytest.raises(EmbedderUnavailable, match="HTTP 404"):  # /prefix/v1/embeddings
        await endpoint.embed(TEXTS[:1])


# the configuration


@pytest.mark.asyncio
async def test_make_embedder_follows_search(embed_server, tmp_path):
    assert isinstance(make_embedder(NodeConfig.from_mapping({}).search), NoEmbedder)
    assert isinstance(make_embedder(SearchConfig(embedder="wordllama")), WordLlamaEmbedder)
    embed_server.key = "k-1"
    (tmp_path / "key").write_text("k-1\n")
    config = NodeConfig.from_mapping(
        tomllib.loads(f"""
        [search]
        embedder = "endpoint"
        url = "{embed_server.url}"
        model = "l2_supercat"
        key_file = "{tmp_path / "key"}"
        timeout = "2s"
        batch = 1
        fusion_weight = 1
    """)
    )
    assert config.search == SearchConfig(
        "endpoint", embed_server.url, "l2_supercat", tmp_path / "key", 2000, 1, 1.0
    )
    endpoint = make_embedder(config.search)
    assert endpoint.model == f"endpoint:l2_supercat@{embed_server.url.removeprefix('http://')}"
    assert (await endpoint.embed(TEXTS[:2])).shape == (2, 256)
    assert [r["body"]["input"] for r in embed_server.received] == [TEXTS[:1], TEXTS[1:2]]


@pytest.mark.asyncio
async def test_no_embedder_is_never_asked():
    none = NoEmbedder()
    assert (none.model, none.dim) == ("none", None)
    with pytest.raises(EmbedderError, match=r"no embedder is configured \(\[search\] embedder"):
        await none.embed(TEXTS)
    await none.aclose()


SEARCH_PROBLEMS = [
    ({"embedder": "bert"}, "search.embedder must be one of none, wordllama, endpoint"),
    (
        {"embedder": "endpoint", "model": "m"},
        'search.url is required when search.embedder is "endpoint"',
    ),
    (
        {"embedder": "endpoint", "url": "http://h:1"},
        'search.model is required when search.embedder is "endpoint"',
    ),
    ({"url": "ftp://h"}, "search.url: 'ftp://h' is not an http:// or https:// URL"),
    ({"url": "http://h:port"}, "search.url: 'http://h:port' is not an http:// or https:// URL"),
    ({"url": "https://me:pw@h"}, "search.url must not hold credentials (use search.key_file)"),
    (
        {"url": "http://h:11434/v1"},
        "search.url: 'http://h:11434/v1' must be the server's base "
        "URL, without /v1 (/v1/embeddings is added), a query or a "
        "fragment",
    ),
    ({"model": ""}, "search.model must be a model name"),
    ({"key_file": "relative/key"}, "search.key_file must be an absolute path"),
    (
        {"key_file": "/nonexistent/key"},
        "search.key_file: '/nonexistent/key' is not a readable file",
    ),
    ({"timeout": "10"}, "search.timeout: '10' is not a duration like 30s, 5m, 2h, 1d or 1w"),
    ({"timeout": "1h"}, "search.timeout must be at most 10m"),
    ({"batch": 0}, "search.batch must be an integer from 1 to 256"),
    ({"batch": 257}, "search.batch must be an integer from 1 to 256"),
    ({"batch": 2.0}, "search.batch must be an integer from 1 to 256"),
    ({"fusion_weight": 1.5}, "search.fusion_weight must be a number from 0 to 1"),
    ({"fusion_weight": -0.1}, "search.fusion_weight must be a number from 0 to 1"),
    ({"fusion_weight": True}, "search.fusion_weight must be a number from 0 to 1"),
    ({"fusion_weight": float("nan")}, "search.fusion_weight must be a number from 0 to 1"),
    (
        {"rerank": True},
        "search may set only batch, embedder, fusion_weight, key_file, model, timeout, url",
    ),
]


@pytest.mark.parametrize(("table", "problem"), SEARCH_PROBLEMS)
def test_each_search_problem_is_reported(table, problem):
    with pytest.raises(InvalidConfig) as raised:
        NodeConfig.from_mapping({"search": table})
    assert raised.value.problems == [problem]


def test_every_search_problem_is_reported_at_once():
    table = {"embedder": "endpoint", "batch": 0, "fusion_weight": 2, "timeout": "soon"}
    with pytest.raises(InvalidConfig) as raised:
        NodeConfig.from_mapping({"search": table})
    assert len(raised.value.problems) == 5


def test_unit_rows_keeps_zero_rows_zero():
    rows = unit_rows([[3.0, 4.0], [0.0, 0.0]])
    assert rows.dtype == np.float32
    assert rows.tolist() == [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]
