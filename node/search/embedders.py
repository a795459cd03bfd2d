"""Embedders: texts → unit vectors for the semantic leg of ``e_timeline find`` (docs/search.md).

An embedder's ``model`` tag names its model and version exactly: a vector index built under
one tag is refused and rebuilt under another, so the tag changes whenever the vectors would.
Every row an embedder answers is L2-normalised float32; a blank text (nothing but
whitespace) embeds as the zero vector, similar to nothing.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import ipaddress
import json
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import SplitResult, urlsplit

import numpy as np
import numpy.typing as npt
from typing_extensions import override

from node.errors import ConfigError, EmbedderError, EmbedderUnavailable
from node.logging import get_logger
from node.search import http1
from node.search.settings import SearchConfig

__all__ = [
    "MAX_RESPONSE",
    "Embedder",
    "EndpointEmbedder",
    "NoEmbedder",
    "Vectors",
    "WordLlamaEmbedder",
    "make_embedder",
    "unit_rows",
]

Vectors = npt.NDArray[np.float32]
MAX_RESPONSE = 64 * 1024 * 1024
_SEMANTIC = "pip install 'memlane[semantic]'"
_WORDLLAMA_CONFIG, _WORDLLAMA_DIM = "l2_supercat", 256
# Texts × the longest one's UTF-8 length per call of the model: wordllama pads a batch to
# its longest text and gathers (texts, tokens, 256) float32, so this bounds that array to
# 128 MiB (a token is at least a byte) whatever the batch holds — 32 texts of 100,000
# characters would otherwise take 2 GiB.
_PAD_BUDGET = 1 << 17

log = get_logger(__name__)


class Embedder(Protocol):
    @property
    def model(self) -> str:
        """The model and its version, exactly: ``wordllama:l2_supercat_256@0.4.0.post1``."""

    @property
    def dim(self) -> int | None:
        """The vectors' length; ``None`` until an endpoint has first answered."""

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """``(len(texts), dim)`` float32, each row of unit length (a blank text's is zero)."""

    async def aclose(self) -> None:
        """Let go of the model or connections; the embedder is not used after."""


def unit_rows(vectors: npt.ArrayLike) -> Vectors:
    """``vectors`` as float32 rows of unit length; a zero row stays zero."""
    rows = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    unit: npt.NDArray[np.float64] = np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)
    return unit.astype(np.float32)


def make_embedder(config: SearchConfig) -> Embedder:
    """The embedder ``[search]`` names; an endpoint's key file is read here."""
    if config.embedder == "wordllama":
        return WordLlamaEmbedder()
    if config.embedder == "endpoint":
        if config.url is None or config.model is None:
            raise ConfigError('search.url and search.model are required for "endpoint"')
        return EndpointEmbedder(
            config.url,
            config.model,
            key_file=config.key_file,
            timeout=config.timeout_ms / 1000,
            batch=config.batch,
        )
    return NoEmbedder()


class NoEmbedder(Embedder):
    """``[search] embedder = "none"``: no semantic leg; find ranks by BM25 alone."""

    model = "none"
    dim: int | None = None

    @override
    async def embed(self, texts: Sequence[str]) -> Vectors:
        raise EmbedderError('no embedder is configured ([search] embedder = "none")')

    async def aclose(self) -> None:
        return None


class WordLlamaEmbedder:
    """wordllama's ``l2_supercat`` at 256 dimensions, loaded from the files its wheel ships,
    with downloads disabled: it runs with no network.  Loading and embedding run on a
    thread, one call at a time (so their memory is bounded once, not per caller)."""

    def __init__(self) -> None:
        self.model = f"wordllama:{_WORDLLAMA_CONFIG}_{_WORDLLAMA_DIM}@{_wordllama_version()}"
        self.dim = _WORDLLAMA_DIM
        self._inference: Any = None
        self._lock = asyncio.Lock()

    async def embed(self, texts: Sequence[str]) -> Vectors:
        batch = _texts(texts)
        async with self._lock:
            if self._inference is None:
                self._inference = await asyncio.to_thread(_load_wordllama)
            return await asyncio.to_thread(_embed_wordllama, self._inference, batch)

    async def aclose(self) -> None:
        self._inference = None


def _texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise TypeError("texts must be a sequence of str (one str is not)")
    return list(texts)


def _wordllama_version() -> str:
    try:
        return importlib.metadata.version("wordllama")
    except importlib.metadata.PackageNotFoundError:
        raise EmbedderUnavailable(f"wordllama is not installed: {_SEMANTIC}") from None


def _import_wordllama() -> Any:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import wordllama
    except ImportError as exc:
        raise EmbedderUnavailable(f"wordllama cannot be imported ({exc}): {_SEMANTIC}") from exc
    finally:  # its import calls logging.basicConfig(level=INFO); the node's logging is its own
        root.handlers[:] = handlers
        root.setLevel(level)
    return wordllama


def _load_wordllama() -> Any:
    wordllama = _import_wordllama()
    package = Path(wordllama.__file__).parent
    try:
        # The weights resolve from <package>/weights/; the tokenizer is looked for in
        # <package>/tokenizer/ (a folder the wheel lacks), then in <cache_dir>/tokenizers/,
        # where the wheel has it.  disable_download turns a missing file into an error
        # instead of a fetch from a model hub.
        return wordllama.WordLlama.load(
            config=_WORDLLAMA_CONFIG, dim=_WORDLLAMA_DIM, cache_dir=package, disable_download=True
        )
    except (OSError, ValueError) as exc:
        raise EmbedderUnavailable(
            f"wordllama's {_WORDLLAMA_CONFIG}_{_WORDLLAMA_DIM} files are not usable in "
            f"{package} ({exc}): reinstall with {_SEMANTIC}"
        ) from exc


def _embed_wordllama(inference: Any, texts: list[str]) -> Vectors:
    pooled = np.zeros((len(texts), _WORDLLAMA_DIM), dtype=np.float32)
    sent = _nonblank(texts)
    kept = [texts[i] for i in sent]
    for lo, hi in _padded_chunks(kept):
        # norm=False: unit_rows normalises (in float64, keeping a zero row zero)
        pooled[sent[lo:hi]] = inference.embed(kept[lo:hi], norm=False, batch_size=hi - lo)
    return unit_rows(pooled)


def _nonblank(texts: list[str]) -> list[int]:
    """Where ``texts`` has more than whitespace (the others embed as zero rows)."""
    return [i for i, text in enumerate(texts) if text.strip()]


def _padded_chunks(texts: list[str]) -> Iterator[tuple[int, int]]:
    """Runs of ``texts`` whose count × longest UTF-8 length stays within ``_PAD_BUDGET``
    (a single longer text is a run alone)."""
    lo, longest = 0, 0
    for i, text in enumerate(texts):
        size = len(text.encode()) + 1
        if i > lo and (i - lo + 1) * max(longest, size) > _PAD_BUDGET:
            yield lo, i
            lo, longest = i, 0
        longest = max(longest, size)
    if lo < len(texts):
        yield lo, len(texts)


class EndpointEmbedder:
    """An OpenAI-compatible ``POST <url>/v1/embeddings`` (Ollama, vLLM, llama.cpp's server,
    TEI): ``{"model", "input": [texts]}`` → ``{"data": [{"index", "embedding"}, …]}``.

    At most ``batch`` texts per request, each request within ``timeout`` seconds and its
    answer within ``max_response`` bytes.  Blank texts are not sent (servers refuse empty
    input); their rows are zero.  Until the endpoint first answers, ``dim`` is ``None`` and a
    call of blank texts only answers ``(len(texts), 0)``."""

    def __init__(
        self,
        url: str,
        model: str,
        *,
        key_file: Path | None = None,
        timeout: float = 10.0,
        batch: int = 32,
        max_response: int = MAX_RESPONSE,
    ) -> None:
        self._url = urlsplit(url)
        self._where = http1.origin(self._url)
        self.model = f"endpoint:{model}@{self._where.partition('://')[2]}"
        self.dim: int | None = None
        self._name, self._timeout, self._batch, self._max = model, timeout, batch, max_response
        self._key = _read_key(key_file) if key_file is not None else None
        _warn_if_plain(self._url, self._where)

    async def embed(self, texts: Sequence[str]) -> Vectors:
        batch = _texts(texts)
        sent = _nonblank(batch)
        parts = [
            await self._request([batch[i] for i in sent[k : k + self._batch]])
            for k in range(0, len(sent), self._batch)
        ]
        rows = np.zeros((len(batch), self.dim or 0), dtype=np.float32)
        if parts:
            rows[sent] = np.concatenate(parts)
        return rows

    async def aclose(self) -> None:
        return None  # a connection lasts one request

    async def _request(self, texts: list[str]) -> Vectors:
        body = json.dumps({"model": self._name, "input": texts}).encode()
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        answer = await http1.post(
            self._url, body, headers, within=self._timeout, max_body=self._max
        )
        self._check_status(answer)
        vectors = await asyncio.to_thread(_vectors, answer.body, len(texts), self._where)
        if self.dim is not None and vectors.shape[1] != self.dim:
            raise EmbedderUnavailable(
                f"{self._where} answered {vectors.shape[1]}-d vectors "
                f"where it had answered {self.dim}-d ones"
            )
        self.dim = vectors.shape[1]
        return vectors

    def _check_status(self, answer: http1.Answer) -> None:
        if answer.status in (401, 403):
            hint = "check search.key_file" if self._key else "it wants a key: set search.key_file"
            raise EmbedderUnavailable(
                f"{self._where} refused the request (HTTP {answer.status}): {hint}"
            )
        if answer.status != 200:
            said = _said(answer.body)
            raise EmbedderUnavailable(
                f"{self._where} answered HTTP {answer.status} "
                f"{answer.reason}{f': {said}' if said else ''}"
            )


def _vectors(body: bytes, count: int, where: str) -> Vectors:
    """The answer's embeddings in input order, as unit rows; anything else is refused."""
    try:
        data = json.loads(body).get("data")
    except (ValueError, AttributeError):  # (not JSON; JSON but not an object)
        raise EmbedderUnavailable(f"{where} did not answer a JSON object") from None
    if not isinstance(data, list) or len(data) != count:
        got = len(data) if isinstance(data, list) else "no"
        raise EmbedderUnavailable(f"{where} answered {got} embeddings for {count} texts")
    if not all(isinstance(d, dict) and type(d.get("index")) is int for d in data):
        raise EmbedderUnavailable(f"{where} answered data items without an integer index")
    items = sorted(data, key=lambda d: int(d["index"]))
    if [d["index"] for d in items] != list(range(count)):
        raise EmbedderUnavailable(f"{where} answered indices other than 0 to {count - 1}")
    return unit_rows(_matrix([d.get("embedding") for d in items], where))


def _matrix(rows: list[Any], where: str) -> npt.NDArray[np.float64]:
    try:
        matrix = np.array(rows)
    except ValueError:  # rows of different lengths
        matrix = np.array([])
    if matrix.ndim != 2 or matrix.shape[1] == 0 or matrix.dtype.kind not in "fi":
        raise EmbedderUnavailable(
            f"{where} answered embeddings that are not lists of numbers of one length"
        )
    if not np.isfinite(matrix).all():
        raise EmbedderUnavailable(f"{where} answered embeddings that are not finite")
    return matrix.astype(np.float64)


def _said(body: bytes) -> str:
    """The error message an OpenAI-style (``{"error": {"message"}}``) or Ollama-style
    (``{"error": "…"}``) answer gives, cut to 200 characters; else nothing."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return ""
    message = error.get("message") if isinstance(error, dict) else error
    return message[:200] if isinstance(message, str) else ""


def _read_key(path: Path) -> str:
    try:
        key = path.read_text().strip()
    except OSError as exc:
        raise ConfigError(f"search.key_file: cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"search.key_file: {path} is not text") from None
    if not key or not all("!" <= c <= "~" for c in key):  # it goes into a header line
        raise ConfigError(
            f"search.key_file: {path} must hold one key of printable ASCII without spaces"
        )
    return key


def _warn_if_plain(url: SplitResult, where: str) -> None:
    host = url.hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if url.scheme == "http" and not loopback:
        log.warning(
            "embedder_plain_http",
            endpoint=where,
            hint="SR titles, texts and tags travel unencrypted: use https",
        )
