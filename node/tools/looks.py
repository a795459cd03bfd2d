"""The reads the web view shows that the agent-facing catalog does not hold (docs/web.md
§Looks): a record's versions, activity over time, the mesh's state, which SRs are private.
Each is a handler of the tools' one signature (``handler(ctx, caller, args)``), in a module of
node/tools beside the tools, applying the read rule the tools apply; it is called by
``Node.look`` and never offered over MCP or the CLI, whose surface the seeds fix.
"""

from __future__ import annotations

from node.tools.context import Handler
from node.tools.look_activity import look_activity
from node.tools.look_changes import look_changed_values
from node.tools.look_history import look_sr_history
from node.tools.look_mesh import look_mesh
from node.tools.look_private import look_private_srs

__all__ = ["LOOKS", "unknown_look"]

LOOKS: dict[str, Handler] = {
    "mesh": look_mesh,
    "activity": look_activity,
    "changed_values": look_changed_values,
    "sr_history": look_sr_history,
    "private_srs": look_private_srs,
}


def unknown_look(name: str) -> str:
    """The refusal of a look this node does not have."""
    return f"unknown look: {name}"
