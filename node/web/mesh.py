"""The mesh page (docs/web.md §Pages): the look ``mesh`` — this node, its logs and their heads,
the mesh's members, the peers as sync last saved them, the latest audit events — for a token
with ``admin:workspace``; any other gets status 403 and the refusal, nothing of the node."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.responses import HTMLResponse

from node.access.callers import Caller
from node.errors import Forbidden
from node.node import Node
from node.node_state import NO_EXPIRY_MS
from node.web.pages import instant_text, render
from protocol.timefmt import format_instant

__all__ = ["mesh"]

_NEVER = format_instant(NO_EXPIRY_MS)


async def mesh(node: Node, caller: Caller, _query: Mapping[str, str]) -> HTMLResponse:
    """The look's answer, or its refusal with status 403."""
    try:
        shown = await node.look("mesh", caller)
    except Forbidden as exc:
        return render("mesh.html", 403, caller=caller, problem=str(exc), mesh=None)
    members = [m | {"cert_expires": _expiry(m["cert_expires"])} for m in shown["members"]]
    return render("mesh.html", caller=caller, problem=None, mesh=shown | {"members": members})


def _expiry(cert_expires: str | None) -> Any:
    """When a member's certificate expires, as the page says it: "never" for the authority's
    own node (docs/mesh.md §Certificates), nothing for a member not yet added."""
    if cert_expires is None:
        return None
    return "never" if cert_expires == _NEVER else instant_text(cert_expires)
