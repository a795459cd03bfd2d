"""The windows package's errors (STYLE: a small typed tree per package)."""

from __future__ import annotations

from node.errors import ConfigError, Refusal

__all__ = ["DeclarationError", "WindowError"]


class WindowError(Refusal):
    """A turn context or a window in it is malformed; nothing is filed and nothing runs."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"invalid memlane/turn: {detail}")
        self.detail = detail


class DeclarationError(ConfigError):
    """A tool's period declaration breaks a definition check (docs/time-windows.md §Declaring
    period forms); raised at start-up, before any call."""
