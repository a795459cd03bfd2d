"""What ``make demo`` prints: its steps numbered one by one, and each tool call's arguments
shown on one line, cut at a word boundary with an ellipsis when they run long."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["ARGUMENTS_SHOWN", "Steps", "arguments"]

ARGUMENTS_SHOWN = 80  # characters of a call's arguments, the ellipsis included
_WORD_END = re.compile(r"\w(?=\W)|\w$")


class Steps:
    """Numbers the demo's steps in the order they are told, so no two share a number."""

    def __init__(self) -> None:
        self.told = 0

    def say(self, text: str) -> None:
        self.told += 1
        print(f"{self.told}. {text}", flush=True)


def arguments(args: dict[str, Any], limit: int = ARGUMENTS_SHOWN) -> str:
    """``args`` as JSON, whole if it fits in ``limit`` characters, else cut after the last
    word that fits (never mid-word) and ended with ``…``."""
    text = json.dumps(args, ensure_ascii=False)
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    ends = [m.end() for m in _WORD_END.finditer(head) if m.end() < len(head) or _ends(text, m)]
    cut = ends[-1] if ends else len(head)
    return head[:cut] + "…"


def _ends(text: str, match: re.Match[str]) -> bool:
    """A word that reaches the end of the kept part ends there only if the text does too, or
    goes on with what is not a word character."""
    after = match.end()
    return after >= len(text) or not (text[after].isalnum() or text[after] == "_")
