"""``[search]``: the embedder of find's semantic leg, its endpoint and bounds, as a
``SearchConfig``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, urlsplit

from node.config.values import MAX_TIMEOUT_MS, parse_duration_ms
from node.errors import ConfigError
from node.search.settings import EMBEDDERS, SearchConfig

__all__ = ["read_search"]


_SEARCH_KEYS = {"embedder", "url", "model", "key_file", "timeout", "batch", "fusion_weight"}
_MAX_BATCH = 256


def read_search(raw: Any, problems: list[str]) -> SearchConfig:
    """``[search]`` as a ``SearchConfig`` (the default one when it has problems)."""
    if not isinstance(raw, dict) or set(raw) - _SEARCH_KEYS:
        problems.append(f"search may set only {', '.join(sorted(_SEARCH_KEYS))}")
        return SearchConfig()
    before = len(problems)
    embedder = raw.get("embedder", "none")
    if embedder not in EMBEDDERS:
        problems.append(f"search.embedder must be one of {', '.join(EMBEDDERS)}")
    values = {"embedder": embedder, **_search_endpoint(raw, embedder, problems)}
    values.update(_search_bounds(raw, problems))
    return SearchConfig(**values) if len(problems) == before else SearchConfig()


def _search_endpoint(raw: dict[str, Any], embedder: Any, problems: list[str]) -> dict[str, Any]:
    url, model, key_file = raw.get("url"), raw.get("model"), raw.get("key_file")
    if embedder == "endpoint" and url is None:
        problems.append('search.url is required when search.embedder is "endpoint"')
    elif url is not None:
        _check_url(url, problems)
    if embedder == "endpoint" and model is None:
        problems.append('search.model is required when search.embedder is "endpoint"')
    elif model is not None and (not isinstance(model, str) or not model.strip()):
        problems.append("search.model must be a model name")
    path = _key_file(key_file, problems) if key_file is not None else None
    return {"url": url, "model": model, "key_file": path}


def _check_url(url: Any, problems: list[str]) -> None:
    parts = _url_parts(url)
    if parts is None:
        problems.append(f"search.url: {url!r} is not an http:// or https:// URL")
    elif parts.username is not None or parts.password is not None:
        problems.append("search.url must not hold credentials (use search.key_file)")
    elif parts.query or parts.fragment or parts.path.rstrip("/").endswith("/v1"):
        problems.append(
            f"search.url: {url!r} must be the server's base URL, without /v1 "
            "(/v1/embeddings is added), a query or a fragment"
        )


def _url_parts(url: Any) -> SplitResult | None:
    if not isinstance(url, str):
        return None
    try:
        parts = urlsplit(url)
        if parts.scheme in ("http", "https") and parts.hostname and parts.port != 0:
            return parts  # (.port raises ValueError for a port that is not a number)
    except ValueError:
        pass
    return None


def _key_file(value: Any, problems: list[str]) -> Path | None:
    path = Path(value).expanduser() if isinstance(value, str) and value else None
    if path is None or not path.is_absolute():
        problems.append("search.key_file must be an absolute path")
        return None
    if not path.is_file() or not os.access(path, os.R_OK):
        problems.append(f"search.key_file: {str(path)!r} is not a readable file")
        return None
    return path


def _search_bounds(raw: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        if "timeout" in raw:
            out["timeout_ms"] = parse_duration_ms(raw["timeout"])
            if out["timeout_ms"] > MAX_TIMEOUT_MS:
                problems.append("search.timeout must be at most 10m")
    except ConfigError as exc:
        problems.append(f"search.timeout: {exc}")
    batch = raw.get("batch", 32)
    if type(batch) is not int or not 1 <= batch <= _MAX_BATCH:
        problems.append(f"search.batch must be an integer from 1 to {_MAX_BATCH}")
    out["batch"] = batch
    weight = raw.get("fusion_weight", 0.25)
    if type(weight) not in (int, float) or not 0 <= weight <= 1:  # bool is not a weight
        problems.append("search.fusion_weight must be a number from 0 to 1")
    out["fusion_weight"] = float(weight) if type(weight) in (int, float) else 0.25
    return out
