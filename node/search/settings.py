"""``[search]`` of ``config.toml`` as the search package takes it (docs/search.md): plain
settings, no numpy, so the configuration can name them without loading an embedder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["EMBEDDERS", "SearchConfig"]

EMBEDDERS = ("none", "wordllama", "endpoint")


@dataclass(frozen=True, slots=True)
class SearchConfig:
    """``[search]``: which embedder the semantic leg of find uses, and its bounds."""

    embedder: str = "none"
    url: str | None = None
    model: str | None = None
    key_file: Path | None = None
    timeout_ms: int = 10_000
    batch: int = 32
    fusion_weight: float = 0.25
