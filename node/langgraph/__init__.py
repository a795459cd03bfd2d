"""memlane as the long-term memory of LangGraph applications (docs/langgraph.md), in the
``langgraph`` extra (``pip install 'memlane[langgraph]'``): the only package of ``node`` that
imports LangGraph, so the node itself never needs it.

``store`` (``MemlaneStore``, a ``BaseStore`` over a node, bound to one token), ``retriever``
(``MemlaneRetriever``, a LangChain ``BaseRetriever`` over find), ``loop`` (the
node held open on a loop in a thread of its own), ``filters`` (what LangGraph's stores match:
search filters, namespace conditions), ``example`` (``python -m node.langgraph.example``: a
graph on two nodes of one mesh, one finding what the other stored).
"""

from __future__ import annotations

from node.langgraph.retriever import MemlaneRetriever
from node.langgraph.store import MemlaneStore

__all__ = ["MemlaneRetriever", "MemlaneStore"]
