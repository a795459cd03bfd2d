"""memlane's node: store, views, authority, tools and surfaces over ``protocol``.

The names below load on first use, so ``import node.cli`` (the ``memlane`` command's parser)
does not pay for the whole node.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from node.access.callers import Caller
    from node.errors import NodeError, Refusal
    from node.node import Node, NodeInfo

__all__ = ["Caller", "Node", "NodeError", "NodeInfo", "Refusal"]

_HOME = {
    "Caller": "node.access.callers",
    "NodeError": "node.errors",
    "Refusal": "node.errors",
    "Node": "node.node",
    "NodeInfo": "node.node",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'node' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME[name]), name)
