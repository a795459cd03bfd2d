"""The mesh page (docs/web.md §Pages): the look ``mesh`` — this node, its logs and their heads,
the mesh's members, the peers as sync last saved them, the latest audit events — for a token
with ``admin:workspace``; any other gets status 403 and the refusal, nothing of the node."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.responses import HTMLResponse

from node.access.callers import Caller
from node.errors import Forbidden
from node.node import Node
from node.web.pages import render

__all__ = ["mesh"]


async def mesh(node: Node, caller: Caller, _query: Mapping[str, str]) -> HTMLResponse:
    """The look's answer, or its refusal with status 403."""
    try:
        shown = await node.look("mesh", caller)
    except Forbidden as exc:
        return render("mesh.html", 403, caller=caller, problem=str(exc), mesh=None)
    return render("mesh.html", caller=caller, problem=None, mesh=shown)
