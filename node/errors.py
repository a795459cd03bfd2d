"""The node's typed error tree.

``NodeError`` is the root.  Tool refusals carry the exact text a caller sees (``Refusal``);
store, configuration and embedder problems carry a hint for the operator.  Foreign exceptions
(``sqlite3``, ``msgpack``, ``cryptography``) are translated once, where they are raised.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AlreadyServing",
    "AuthError",
    "CannotListen",
    "ConfigError",
    "DiskRefused",
    "EmbedderError",
    "EmbedderUnavailable",
    "EntryRejected",
    "Forbidden",
    "NodeError",
    "NotInitialised",
    "Refusal",
    "StoreError",
    "StoreVersionError",
    "Unauthenticated",
]


class NodeError(Exception):
    """Root of every error the node raises on purpose."""


class ConfigError(NodeError):
    """The node's configuration or data directory is unusable."""


class NotInitialised(ConfigError):
    """The data directory holds no node (run ``memlane init``)."""


class AlreadyServing(ConfigError):
    """Another ``memlane serve`` holds the data directory (its lock file, ``serve.lock``)."""


class CannotListen(NodeError):
    """A port ``memlane serve`` was to listen on cannot be bound; the message names the
    address, the reason and the flag, variable or key that sets it."""


class StoreError(NodeError):
    """The store failed (I/O, corruption, a constraint); nothing of the failed batch is stored."""


class DiskRefused(StoreError):
    """The disk refused a write (full, or an I/O error): the batch is rolled back, nothing of
    it stored; the node stays up, and a write that fits once space returns succeeds
    (docs/operations.md §A full disk).  Its text is SQLite's reason, shown to callers as is."""


class StoreVersionError(StoreError):
    """The store was written by a newer memlane."""


class EmbedderError(NodeError):
    """The semantic leg of search could not embed (docs/search.md)."""


class EmbedderUnavailable(EmbedderError):
    """The embedder is missing, down, refused, timed out or answered what is not embeddings;
    the message says which and, where one helps, what to do about it."""


class EntryRejected(NodeError):
    """A received entry was refused; ``reason`` is the audited hint."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Refusal(NodeError):
    """A tool call refused; ``text`` is exactly what the caller is shown."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def answer(self) -> dict[str, Any]:
        """The tool result a surface answers with: ``{"error": text}`` and what a refusal
        adds (a call refused before dispatch adds its ``call_window``)."""
        return {"error": self.text}


class AuthError(Refusal):
    """The caller may not do this."""


class Unauthenticated(AuthError):
    """No valid token: missing, unknown, expired or revoked (indistinguishable on purpose).

    ``HINT`` is for the operator, beside the text, never in place of it: the same words
    whatever the token was, so it tells nothing about which tokens exist (docs/authority.md
    §Tokens)."""

    HINT = (
        "a token is valid only on the node that issued it, until it expires or is revoked "
        "(`memlane token list` there shows it)"
    )

    def __init__(self) -> None:
        super().__init__("unauthenticated: a valid token is required")


class Forbidden(AuthError):
    """The caller's token lacks the scope this call needs."""
