"""The agents of ``make demo``: each is the MCP SDK's client over streamable HTTP, with its
own bearer token on its own node.  One writes SRs and episodes; the other reads them back on
another node after sync."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from node.demo.transcript import Steps, arguments

__all__ = ["Agent"]


class Agent:
    """``async with Agent(name, url, token) as agent``: a session with one node's MCP."""

    def __init__(self, node: str, url: str, token: str) -> None:
        self.node, self.url, self.token = node, url, token
        self._stack = AsyncExitStack()
        self._client: Any = None

    async def __aenter__(self) -> Agent:
        http = await self._stack.enter_async_context(
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.token}"})
        )
        self._client = await self._stack.enter_async_context(
            Client(streamable_http_client(self.url, http_client=http))
        )
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._stack.aclose()

    async def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await self._client.call_tool(tool, args)
        answer: dict[str, Any] = result.structured_content or json.loads(result.content[0].text)
        print(f"   agent on {self.node} → {tool} {arguments(args)}")
        return answer

    async def work(self, notes: list[str]) -> list[str]:
        """An SR and an episode per note; the episodes' ids, oldest first."""
        ids = []
        for note in notes:
            await self.call("e_write", {"title": note, "text": note, "tags": ["gateway"]})
            ids.append((await self.call("work_record", {"summary": note}))["id"])
        return ids

    async def read_back(self, since: str, episodes: list[str], steps: Steps) -> bool:
        """On this node: every SR listed, each one a change since ``since``, and the episode
        chain walking back through every episode."""
        listed = await self.call("e_timeline", {"action": "list", "page_size": 50})
        changed = await self.call("e_timeline", {"action": "changes", "since": since})
        chain = await self.call(
            "work_episode_chain", {"id": episodes[-1], "k": 10, "response_format": "concise"}
        )
        titles = sorted(r["title"] for r in listed["results"])
        walked = [e["id"] for e in chain["chain"]]
        steps.say(
            f"C's agent reads: {len(titles)} SRs listed, {len(changed['changes'])} "
            f"new since {since}, a chain of {len(walked)} episodes"
        )
        for episode in chain["chain"]:
            print(f"     {episode['id']}  {episode['summary']}")
        return (
            len(titles) == len(episodes)
            and all(c["change"] == "new" for c in changed["changes"])
            and len(changed["changes"]) == len(episodes)
            and walked == episodes[::-1]
        )
