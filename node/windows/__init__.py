"""Time windows of tool calls (docs/time-windows.md): period forms, conversion, read-back,
the decision and its CallWindowRow.  Pure functions: no IO, no clock — ``now`` is passed in."""

from __future__ import annotations

from node.windows.errors import DeclarationError, WindowError

__all__ = ["DeclarationError", "WindowError"]
