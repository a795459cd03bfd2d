"""The protocol's typed error tree.

``LocalProtocolError`` means *we* were asked to build something invalid (an authoring bug or bad
tool input that reached the protocol layer); ``RemoteProtocolError`` means bytes from elsewhere
(a peer, a bundle, a file) are not a valid entry.  Both carry a short ``hint`` naming what was
wrong, and, where one field is to blame, that ``field``.
"""

from __future__ import annotations

__all__ = [
    "LocalProtocolError",
    "OverLimits",
    "PayloadError",
    "ProtocolError",
    "RemoteProtocolError",
]


class ProtocolError(Exception):
    """Root of every error raised by ``protocol``."""

    def __init__(self, hint: str, *, field: str | None = None) -> None:
        super().__init__(f"{field}: {hint}" if field else hint)
        self.hint = hint
        self.field = field


class LocalProtocolError(ProtocolError):
    """Something this node tried to build or send is invalid."""


class RemoteProtocolError(ProtocolError):
    """Something that arrived (bytes, an entry, a payload) is invalid."""


class OverLimits(RemoteProtocolError):
    """What arrived is beyond a decoding limit (objects, depth, lengths) of its message type."""


class PayloadError(ProtocolError):
    """A payload does not match its kind's schema; ``field`` names the culprit.

    Raised by validation on both paths; the receive path re-raises it as a
    ``RemoteProtocolError``, authoring as a refusal.
    """
