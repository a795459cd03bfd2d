"""The agent part of ``make demo``: the node serves MCP over streamable HTTP on loopback, and
an agent — the MCP SDK's client with its own bearer token — lists the tools, writes SRs and
episodes, and reads them back."""

from __future__ import annotations

import json
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from node.address import Listen
from node.mcp.http import http_server
from node.node import Node

__all__ = ["agent_session"]


async def _call(client: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    answer: dict[str, Any] = result.structured_content or json.loads(result.content[0].text)
    shown = json.dumps(args, ensure_ascii=False)
    print(f"  → {tool} {shown[:90]}")
    return answer


async def agent_session(node: Node) -> bool:
    """One short session over HTTP; True when everything read back as written."""
    token = await node.create_token("scout", "research", ["read:workspace", "write:workspace"])
    listener = Listen("127.0.0.1", 0).bind()
    with listener:
        async with http_server(node, listener) as endpoint:
            print(f"\nMCP over streamable HTTP at {endpoint.url}; an agent connects as 'scout':")
            headers = {"Authorization": f"Bearer {token.token}"}
            async with (
                httpx2.AsyncClient(headers=headers) as http,
                Client(streamable_http_client(endpoint.url, http_client=http)) as client,
            ):
                return await _session(client)


async def _session(client: Any) -> bool:
    tools = await client.list_tools()
    print(f"  {len(tools.tools)} tools: {', '.join(t.name for t in tools.tools)}")
    notes = [("Gateway latency", "p99 rose to 840 ms after the TLS change"),
             ("Rollback plan", "revert the TLS change, then drain the canary")]  # fmt: skip
    for title, text in notes:
        await _call(client, "e_write", {"title": title, "text": text, "tags": ["gateway"]})
    first = await _call(client, "work_record", {"summary": "measured the gateway", "tool": "curl"})
    second = await _call(client, "work_record", {"summary": "wrote the rollback plan"})
    found = await _call(client, "e_timeline", {"action": "find", "query": "TLS change"})
    print(f"    find: {[r['title'] for r in found['results']]}")
    chain = await _call(client, "work_episode_chain", {"id": second["id"], "k": 10,
                                                       "response_format": "concise"})  # fmt: skip
    print(f"    chain: {[e['summary'] for e in chain['chain']]}")
    refused = await _call(client, "work_episode_chain", {"id": second["id"], "k": 0})
    print(f"    refused: {refused}")
    return (
        sorted(r["title"] for r in found["results"]) == sorted(t for t, _ in notes)
        and [e["id"] for e in chain["chain"]] == [second["id"], first["id"]]
        and refused == {"error": "invalid k: must be an integer from 1 to 200"}
    )
