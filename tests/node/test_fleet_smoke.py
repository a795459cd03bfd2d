"""Three served nodes, each ``memlane serve`` in a network namespace of its own on a bridge
(tests/node/netns.py), each with an agent beside it — a real MCP client over streamable HTTP
in the same namespace, writing every 0.2 s (tests/node/fleet_agent.py) — under real faults: a
node's link taken down while writes go on on both sides, then a node killed with SIGKILL and
started again.  Every write a node acknowledged, to its agent or to ``memlane write``, is on
every node once the faults heal, and the logs verify."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.node import fleetkit
from tests.node.netns import Network, network_or_skip
from tests.node.servekit import (
    certified_mesh,
    connected,
    issue,
    memlane,
    node_id_of,
    peers,
    poll,
)

NAMES = ("a", "b", "c")


class Fleet(fleetkit.Fleet):
    """The served nodes of ``NAMES``, each with agents beside it."""

    def __init__(self, net: Network, dirs: dict[str, Path]) -> None:
        super().__init__(net, dirs, NAMES)
        self.agents: list[subprocess.Popen[str]] = []

    def agent(self, name: str, url: str, token: str) -> None:
        """An agent in ``name``'s namespace, writing to it over MCP."""
        argv = [sys.executable, "-m", "tests.node.fleet_agent", url, token, f"agent-{name}"]
        self.agents.append(
            subprocess.Popen(
                self.net.command(NAMES.index(name), argv),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=Path(__file__).parents[2],
            )
        )

    def acknowledged(self) -> list[set[str]]:
        """Stop the agents; the ids each one's node acknowledged."""
        ids: list[set[str]] = []
        for agent in self.agents:
            agent.send_signal(signal.SIGTERM)
            out, err = agent.communicate(timeout=30)
            assert agent.returncode == 0, err
            ids.append({line for line in out.split() if len(line) == 36})
        self.agents = []
        return ids

    def close(self) -> list[tuple[str, int | None]]:
        for agent in self.agents:
            agent.kill()
            agent.communicate(timeout=30)
        return super().close()


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[Fleet, dict[str, str]]]:
    network_or_skip()
    dirs = certified_mesh(tmp_path, list(NAMES))
    tokens = {}
    for name in NAMES:
        (dirs[name] / "config.toml").write_text(
            '[mesh]\nbackoff_max = "2s"\ndead_peer_after = "3s"\n'
        )
        scopes = ["read:workspace", "write:workspace"]
        tokens[name] = asyncio.run(issue(dirs[name], f"agent-{name}", scopes))
    net = Network(len(NAMES))
    served = Fleet(net, dirs)
    try:
        yield served, tokens
    finally:
        ended = served.close()
        net.close()
    assert all(code == 0 for _, code in ended), ended


def _write(served: Fleet, tokens: dict[str, str], name: str, title: str) -> str:
    """A write acknowledged by node ``name`` (the command returned its id)."""
    done = memlane(
        "write", "--data", str(served.dirs[name]), "--token", tokens[name],
        "--title", title, "--json",
    )  # fmt: skip
    sr_id: str = json.loads(done.stdout)["sr_id"]
    return sr_id


def _held(served: Fleet, tokens: dict[str, str], name: str) -> set[str]:
    held: set[str] = set()
    page = 1
    while True:
        listed = memlane(
            "timeline", "list", "--data", str(served.dirs[name]), "--token", tokens[name],
            "--page", str(page), "--page-size", "100", "--json",
        )  # fmt: skip
        results = json.loads(listed.stdout)["results"]
        held |= {r["sr_id"] for r in results}
        if len(results) < 100:
            return held
        page += 1


def _everywhere(served: Fleet, tokens: dict[str, str], acknowledged: set[str]) -> bool:
    return all(acknowledged <= _held(served, tokens, name) for name in NAMES)


def test_a_partition_and_a_kill_lose_nothing_acknowledged(fleet):
    served, tokens = fleet
    for name in NAMES:
        served.agent(name, served.start(name), tokens[name])
    acknowledged = {_write(served, tokens, name, f"before, on {name}") for name in NAMES}
    poll("the first writes everywhere", lambda: _everywhere(served, tokens, acknowledged))

    served.net.cut(2)  # c alone on one side, a and b on the other
    during = {name: _write(served, tokens, name, f"cut off, on {name}") for name in NAMES}
    sides = {during["a"], during["b"]}
    poll("a and b in step", lambda: all(sides <= _held(served, tokens, n) for n in "ab"))
    assert not sides & _held(served, tokens, "c")  # the cut is real: c has neither
    served.net.heal(2)
    acknowledged |= set(during.values())
    poll("the partition healed", lambda: _everywhere(served, tokens, acknowledged))

    acknowledged.add(_write(served, tokens, "b", "just before the kill"))
    served.kill("b")
    acknowledged.add(_write(served, tokens, "a", "while b is down"))
    served.start("b")
    poll("b back in step", lambda: _everywhere(served, tokens, acknowledged))
    by_agents = served.acknowledged()
    print(f"agents acknowledged {[len(ids) for ids in by_agents]} writes")
    assert all(len(ids) >= 3 for ids in by_agents)  # each agent wrote through the faults
    acknowledged |= set().union(*by_agents)
    poll("every agent's writes everywhere", lambda: _everywhere(served, tokens, acknowledged))
    for name in NAMES:
        assert memlane("log", "verify", "--data", str(served.dirs[name])).returncode == 0


def test_a_link_whose_peer_went_silent_is_closed_and_opens_again(fleet):
    """A cut leaves no FIN or RST: without the kernel's probes the link would look live for
    as long as nothing is sent on it (and a peer restarted meanwhile would be turned away as a
    duplicate).  With ``dead_peer_after`` of 3 s, ``memlane peers`` on a says the link to b
    is down within a few seconds of the cut, with why, and live again after the heal."""
    served, _ = fleet
    for name in NAMES:
        served.start(name)
    b = asyncio.run(node_id_of(served.dirs["b"]))
    poll("a linked to b", lambda: connected(served.dirs["a"], b) is not None)
    served.net.cut(NAMES.index("b"))
    cut = time.monotonic()
    poll("the cut seen on a", lambda: connected(served.dirs["a"], b) is None)
    assert time.monotonic() - cut < 15
    (row,) = [r for r in peers(served.dirs["a"])["peers"] if r["node_id"] == b]
    assert row["last_error"], row
    served.net.heal(NAMES.index("b"))
    poll("a linked to b again", lambda: connected(served.dirs["a"], b) is not None)
