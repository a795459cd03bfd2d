"""The fleet benchmark's agents on one node (tests/bench/fleet.py): each a real MCP client over
streamable HTTP (the SDK's, tests/node/mcpkit.py) with a token of its own, calling once every
``interval`` seconds over the tool mix of ``MIX``, until SIGTERM.  Every call is one JSON line
in the output file: when it began (Unix seconds; a failed session: when it failed, and
its milliseconds are its life), the tool, its milliseconds, and its outcome
— ``ok`` (with what a write was acknowledged with: ``entry`` or ``episode``), ``refused:
<text>``, or the exception's type.  A failed session is opened again after ``interval``.

    python -m tests.bench._fleet_agents CONFIG OUT
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from tests.node.mcpkit import decoded, session

__all__ = ["MIX", "WRITES"]

# (label, share): about 55 % find, 15 % list or changes, 15 % write or correct, 10 % work_record
# or work_episode_chain, 5 % the audit catch-up.
MIX = (
    ("find", 55),
    ("list", 8),
    ("changes", 7),
    ("e_write", 10),
    ("e_correct", 5),
    ("work_record", 6),
    ("work_episode_chain", 4),
    ("e_audit", 5),
)
WRITES = frozenset({"e_write", "e_correct", "work_record"})


class Agent:
    """One agent: its token, its own SRs and episodes, its audit cursor."""

    def __init__(self, n: int, token: str, config: dict[str, Any]) -> None:
        self.n, self.token, self.config = n, token, config
        self.rng = random.Random(config["seed"] * 1000 + n)
        self.questions: list[str] = config["questions"]
        self.srs: list[str] = []
        self.episodes: list[str] = []
        self.audit_seq = 0
        self.written = 0

    def pick(self) -> tuple[str, dict[str, Any]]:
        mix = self.config.get("mix", MIX)  # another mix, to see one tool's cost alone
        label = self.rng.choices([m[0] for m in mix], [m[1] for m in mix])[0]
        return label, self._arguments(label)

    def _arguments(self, label: str) -> dict[str, Any]:
        self.written += 1
        name = f"{self.config['node']}-agent{self.n}"
        made: dict[str, Callable[[], dict[str, Any]]] = {
            "find": lambda: {"action": "find", "query": self.rng.choice(self.questions)},
            "list": lambda: {"action": "list"},
            "changes": lambda: {"action": "changes", "since": "2026-01-01"},
            "e_write": lambda: {"title": f"{name} note {self.written}", "text": self._text()},
            "e_correct": lambda: {
                "sr_id": self.rng.choice(self.srs),
                "reason": "a later look",
                "text": self._text(),
            },
            "work_record": lambda: {"summary": f"{name} step {self.written}", "tool": "find"},
            "work_episode_chain": lambda: {"id": self.rng.choice(self.episodes)},
            "e_audit": lambda: {"action": "list", "since_seq": self.audit_seq},
        }
        if label == "e_correct" and not self.srs:
            label = "e_write"
        if label == "work_episode_chain" and not self.episodes:
            label = "work_record"
        return {"_label": label, **made[label]()}

    def _text(self) -> str:
        return f"{self.rng.choice(self.questions)} — as {self.config['node']} saw it"

    def took(self, label: str, answer: dict[str, Any]) -> dict[str, str]:
        """Remember what ``answer`` gives later calls; what a write was acknowledged with (an
        SR write's entry id, an episode's id)."""
        if label == "e_write":
            self.srs.append(answer["sr_id"])
        if label in ("e_write", "e_correct"):
            return {"entry": answer["entry_id"]}
        if label == "work_record":
            self.episodes.append(answer["id"])
            return {"episode": answer["id"]}
        if label == "e_audit":
            self.audit_seq = answer["covered_seq"]
        return {}


class _Recorded(Exception):
    """A call failed and was recorded as that call; its session is opened again."""


def _named(exc: BaseException) -> str:
    """The exception's type, or its group's leaves' types."""
    if isinstance(exc, BaseExceptionGroup):
        return "+".join(sorted({_named(e) for e in exc.exceptions}))
    return type(exc).__name__


def _recorded(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return any(_recorded(e) for e in exc.exceptions)
    return isinstance(exc, _Recorded)


TOOLS = {
    "find": "e_timeline",
    "list": "e_timeline",
    "changes": "e_timeline",
    "e_write": "e_write",
    "e_correct": "e_correct",
    "work_record": "work_record",
    "work_episode_chain": "work_episode_chain",
    "e_audit": "e_audit",
}


async def _calls(agent: Agent, client: Any, out: TextIO, stop: asyncio.Event) -> None:
    interval = agent.config["interval"]
    while not stop.is_set():
        began = time.time()
        label, arguments = agent.pick()
        label = arguments.pop("_label")
        t0 = time.perf_counter()
        record: dict[str, Any] = {"t": began, "tool": label, "agent": agent.n}
        try:
            result = await client.call_tool(TOOLS[label], arguments)
        except Exception as exc:  # the session is done for: recorded, then a new one
            record |= {"ms": (time.perf_counter() - t0) * 1000, "outcome": _named(exc)}
            out.write(json.dumps(record) + "\n")
            raise _Recorded from exc
        record["ms"] = (time.perf_counter() - t0) * 1000
        answer = decoded(result)
        if result.is_error:
            record["outcome"] = f"refused: {answer.get('error')}"
        else:
            record |= {"outcome": "ok", **agent.took(label, answer)}
        out.write(json.dumps(record) + "\n")
        await asyncio.sleep(max(0.0, interval - (time.time() - began)))


async def _agent(agent: Agent, out: TextIO, stop: asyncio.Event) -> None:
    await asyncio.sleep(agent.rng.random() * agent.config["interval"])  # spread the starts
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            async with session(agent.config["url"], agent.token) as client:
                await _calls(agent, client, out, stop)
        except Exception as exc:  # a killed or paused node: a new session after a pause
            if not _recorded(exc):
                ms = (time.perf_counter() - t0) * 1000
                record = {"t": time.time(), "tool": "session", "ms": ms, "agent": agent.n}
                out.write(json.dumps({**record, "outcome": _named(exc)}) + "\n")
            await asyncio.sleep(agent.config["interval"])


async def _run(config: dict[str, Any], out: TextIO) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    agents = [Agent(n, token, config) for n, token in enumerate(config["tokens"])]
    tasks = [asyncio.create_task(_agent(a, out, stop)) for a in agents]
    await stop.wait()
    await asyncio.sleep(config["interval"] * 2)  # calls under way finish and are written
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def main() -> None:
    config_file, path = sys.argv[1:3]
    with open(config_file) as f:
        config = json.load(f)
    with open(path, "a", buffering=1) as out:
        asyncio.run(_run(config, out))


if __name__ == "__main__":
    main()
