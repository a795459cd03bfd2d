"""How a sync connection ends abnormally: ``LinkError`` and its kinds, under ``MeshError``
(docs/mesh.md), and ``guarded``, where what escapes a link's loop is translated into them once.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from node.errors import NodeError, StoreError
from node.members.errors import MeshError
from node.refusals import REFUSALS
from protocol.errors import LocalProtocolError, OverLimits, RemoteProtocolError
from protocol.messages import ErrorCode

__all__ = [
    "LinkError",
    "LinkFailed",
    "LinkRefused",
    "PeerClosedWithError",
    "PeerFlooding",
    "PeerGone",
    "PeerProtocolError",
    "PeerSilent",
    "PeerStalled",
    "StoreFailed",
    "guarded",
]


class LinkError(MeshError):
    """A sync connection ended abnormally; ``code`` is what the peer is told, if anything."""

    code: ErrorCode | None = None


class PeerProtocolError(LinkError):
    """The peer broke the protocol (a bad frame, a message out of turn, beyond credit)."""


class LinkRefused(LinkError):
    """This node will not sync with the peer: not the certificate's key, not admitted,
    itself, or already connected."""

    code = ErrorCode.REFUSED


class PeerFlooding(LinkError):
    """The peer sent more of something than one connection may carry."""

    code = ErrorCode.REFUSED


class PeerSilent(LinkError):
    """No hello from the peer in time."""


class PeerStalled(LinkError):
    """The peer stopped reading: a write did not drain in time."""


class PeerGone(LinkError):
    """The connection was cut (reset, or ended without bye)."""


class PeerClosedWithError(LinkError):
    """The peer closed with an error message."""


class LinkFailed(LinkError):
    """This node failed on its side (its store, or a bug)."""

    code = ErrorCode.INTERNAL


class StoreFailed(LinkFailed):
    """This node's store refused what the peer sent (a full disk, say): the dialler backs
    off as after a failed connection, however far the link got."""


async def guarded(loop: Coroutine[Any, Any, None]) -> None:
    """Run one loop of a link, translating what escapes it into a ``LinkError``."""
    try:
        await loop
    except RemoteProtocolError as exc:
        if isinstance(exc, OverLimits):
            REFUSALS.count("frame_cost")
        if exc.field == "eof":  # the stream ended inside a frame: cut, not malformed
            raise PeerGone(f"the connection was cut: {exc}") from exc
        raise PeerProtocolError(str(exc)) from exc
    except LocalProtocolError as exc:
        raise LinkFailed(f"this node broke the protocol: {exc}") from exc
    except LinkError:
        raise
    except StoreError as exc:
        raise StoreFailed(str(exc)) from exc
    except NodeError as exc:
        raise LinkFailed(str(exc)) from exc
