"""memlane's node: store, views, authority, tools and surfaces over ``protocol``."""

from node.authority import Caller
from node.errors import NodeError, Refusal
from node.node import Node, NodeInfo

__all__ = ["Caller", "Node", "NodeError", "NodeInfo", "Refusal"]
