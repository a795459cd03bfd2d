"""docs/clients.md's recipes, each taken as written — its command, or its URL and headers, with
the paths, token and port substituted — complete ``initialize`` and ``tools/list`` against a
real node: ``memlane mcp`` started as the recipe says, or a ``memlane serve`` on loopback."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.node.clikit import MEMLANE
from tests.node.mcpkit import TIMEOUT, TOOLS, Served, Site, make_site, serve

DOC = Path(__file__).parents[2] / "docs" / "clients.md"
RECIPES = (
    "claude-desktop",
    "claude-code-stdio",
    "claude-code-http",
    "cursor-stdio",
    "cursor-http",
    "vscode-stdio",
    "vscode-http",
    "codex-stdio",
    "codex-http",
    "curl",
)
_RECIPE = re.compile(r"<!-- recipe: ([\w-]+) -->\n```(\w+)\n(.*?)\n```", re.S)


def recipes() -> dict[str, tuple[str, str]]:
    """Every recipe of the page: name → (fence language, text)."""
    return {m[1]: (m[2], m[3]) for m in _RECIPE.finditer(DOC.read_text())}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    return make_site(tmp_path_factory.mktemp("recipes") / "node")


@pytest.fixture(scope="module")
def served(site: Site) -> Iterator[Served]:
    running = serve(site, "--mcp-http", "127.0.0.1:0", "--health-listen", "off")
    yield running
    code, err = running.stop()
    assert code == 0, err


@pytest.fixture(scope="module")
def token_file(site: Site, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("config") / "agent.token"
    path.write_text(site.tokens["alice"] + "\n")
    path.chmod(0o600)
    return path


def substituted(text: str, site: Site, served: Served, token_file: Path) -> str:
    """The recipe as a reader makes it theirs: where memlane is, their data, token and port."""
    for placeholder, value in (
        ("/opt/memlane/.venv/bin/memlane", str(MEMLANE)),
        ("/home/me/.config/memlane/agent.token", str(token_file)),
        ("/home/me/memlane", str(site.data)),
        ("http://127.0.0.1:8765/mcp", served.url),
        ("${input:memlane-token}", site.tokens["alice"]),  # what VS Code asks the user for
        ("mlt_…", site.tokens["alice"]),
    ):
        text = text.replace(placeholder, value)
    return text


# -- what a client does with a recipe ------------------------------------------------------------


def _stdio(command: str, args: list[str], env: dict[str, str] | None = None) -> Client:
    params = StdioServerParameters(command=command, args=args, env=env)
    return Client(params, read_timeout_seconds=TIMEOUT)


async def _listed(client: Client) -> tuple[str, ...]:
    async with client as c:
        return tuple(t.name for t in (await c.list_tools()).tools)


async def _listed_over_http(url: str, headers: dict[str, str]) -> tuple[str, ...]:
    async with httpx2.AsyncClient(headers=headers, timeout=TIMEOUT) as http:
        return await _listed(
            Client(streamable_http_client(url, http_client=http), read_timeout_seconds=TIMEOUT)
        )


async def _from_entry(entry: dict[str, Any], env: dict[str, str]) -> tuple[str, ...]:
    """An ``mcpServers`` / ``servers`` / ``mcp_servers`` entry, as those clients read it."""
    if "command" in entry:
        return await _listed(_stdio(entry["command"], entry.get("args", []), entry.get("env")))
    headers = dict(entry.get("headers", {}))
    if "bearer_token_env_var" in entry:  # Codex: the token from the environment
        headers["Authorization"] = f"Bearer {env[entry['bearer_token_env_var']]}"
    return await _listed_over_http(entry["url"], headers)


async def _from_claude_add(line: str) -> tuple[str, ...]:
    """``claude mcp add``: the command after ``--``, or ``--transport http NAME URL``."""
    words = shlex.split(line)
    assert words[:3] == ["claude", "mcp", "add"], line
    if "--" in words:
        command, *args = words[words.index("--") + 1 :]
        return await _listed(_stdio(command, args))
    assert words[3:5] == ["--transport", "http"], line
    headers = dict(w.split(": ", 1) for w in words[words.index("--header") + 1 :][:1])
    return await _listed_over_http(words[6], headers)


def _from_curl(script: str, token: str) -> tuple[str, ...]:
    env = {"PATH": os.environ["PATH"], "MEMLANE_TOKEN": token}
    done = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    return tuple(t["name"] for t in answer["result"]["tools"])


# -- the tests ---------------------------------------------------------------------------------


def test_the_page_holds_every_client_it_promises() -> None:
    assert tuple(recipes()) == RECIPES


@pytest.mark.asyncio
@pytest.mark.parametrize("name", RECIPES)
async def test_each_recipe_as_written_lists_the_tools(
    name: str, site: Site, served: Served, token_file: Path
) -> None:
    language, text = recipes()[name]
    text = substituted(text, site, served, token_file)
    env = {"MEMLANE_TOKEN": site.tokens["alice"]}
    if language == "json":
        servers = json.loads(text)
        (entry,) = (servers.get("mcpServers") or servers["servers"]).values()
        listed = await _from_entry(entry, env)
    elif language == "toml":
        listed = await _from_entry(tomllib.loads(text)["mcp_servers"]["memlane"], env)
    elif name.startswith("claude-code"):
        listed = await _from_claude_add(text)
    else:
        listed = _from_curl(text, site.tokens["alice"])
    assert listed == TOOLS
