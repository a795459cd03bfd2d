"""The node as the registry of its tools (docs/architecture.md §Adding a tool): every tool of
the catalog is answered by ``Node.call`` through the handler the catalog names, and is an
attribute of the node as well; nothing of a tool is written in node/node.py, node/mcp or the
CLI's dispatch.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from node.errors import Refusal
from node.node import Node
from node.tools.catalog import CATALOG
from node.tools.looks import LOOKS
from tests.node.helpers import CallerFactory

ROOT = Path(__file__).resolve().parents[2]
TOOLS = frozenset(spec.name for spec in CATALOG)


@pytest.mark.asyncio
async def test_a_tool_is_called_by_name_or_as_an_attribute(
    node: Node, make_caller: CallerFactory
) -> None:
    caller = await make_caller()
    written = await node.call("e_write", caller, title="by name")
    also = await node.e_write(caller, title="as an attribute")
    listed = await node.call("e_timeline", caller, action="list")
    assert {r["sr_id"] for r in listed["results"]} == {also["sr_id"], written["sr_id"]}


@pytest.mark.asyncio
async def test_a_name_the_catalog_does_not_hold_is_no_tool(
    node: Node, make_caller: CallerFactory
) -> None:
    caller = await make_caller()
    with pytest.raises(Refusal) as refused:
        await node.call("e_gather", caller)
    assert refused.value.text == "unknown tool: e_gather"
    with pytest.raises(Refusal, match="unknown tool: reader"):
        await node.call("reader", caller)
    assert not hasattr(node, "e_gather")
    with pytest.raises(AttributeError):
        _ = node.e_gather


@pytest.mark.asyncio
async def test_a_look_is_not_a_tool_and_a_tool_is_not_a_look(
    node: Node, make_caller: CallerFactory
) -> None:
    caller = await make_caller()
    with pytest.raises(Refusal) as refused:
        await node.look("e_timeline", caller, action="list")
    assert refused.value.text == "unknown look: e_timeline"
    assert not set(LOOKS) & TOOLS


@pytest.mark.asyncio
async def test_every_way_of_calling_checks_the_arguments_are_text(
    node: Node, make_caller: CallerFactory
) -> None:
    caller = await make_caller()
    for call in (
        node.call("e_audit", caller, since_seq="\ud800"),
        node.e_audit(caller, since_seq="\ud800"),
    ):
        with pytest.raises(Refusal, match="invalid since_seq: must be Unicode text"):
            await call


@pytest.mark.parametrize("path", ["node/node.py", "node/mcp/server.py", "node/cli/commands.py"])
def test_no_tool_is_written_outside_node_tools(path: str) -> None:
    tree = ast.parse((ROOT / path).read_text("utf-8"))
    defined = {
        n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    named = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert (defined | named) & TOOLS == set()
