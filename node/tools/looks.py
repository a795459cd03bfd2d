"""The reads the web view shows that the agent-facing catalog does not hold (docs/web.md
§Looks): a record's versions, activity over time, the mesh's state.  Each is a handler of the
tools' one signature (``handler(ctx, caller, args)``), in a module of node/tools beside the
tools, applying the read rule the tools apply; it is called by ``Node.look`` and never offered
over MCP or the CLI, whose surface the seeds fix.
"""

from __future__ import annotations

from node.tools.context import Handler

__all__ = ["LOOKS", "unknown_look"]

LOOKS: dict[str, Handler] = {}


def unknown_look(name: str) -> str:
    """The refusal of a look this node does not have."""
    return f"unknown look: {name}"
