"""Served nodes of one mesh, each ``memlane serve`` in a network namespace of its own
(tests/node/netns.py), dialling one another on their namespaces' addresses: started, killed,
paused and stopped by signal.  Each node's output goes to files
(``NAME.serve.out``, ``NAME.serve.err``), so a long run never blocks on a full pipe."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from tests.node.clikit import MEMLANE
from tests.node.netns import Network

__all__ = ["SYNC", "Fleet"]

SYNC = 7411  # every node's sync port, on its namespace's address
STARTED = 60.0  # seconds for a serve to print its first line


class Fleet:
    """The served nodes ``names`` (node i in namespace i of ``net``), data in ``dirs``, their
    output in ``logs`` (default: beside the first data directory)."""

    def __init__(
        self, net: Network, dirs: dict[str, Path], names: Sequence[str], logs: Path | None = None
    ) -> None:
        self.net, self.dirs, self.names = net, dirs, tuple(names)
        self.logs = logs or dirs[names[0]].parent
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, *extra: str) -> str:
        """Start ``name``'s serve; its MCP URL (on its namespace's own loopback)."""
        i = self.names.index(name)
        peers = [f"{self.net.address(j)}:{SYNC}" for j in range(len(self.names)) if j != i]
        argv = [str(MEMLANE), "serve", "--data", str(self.dirs[name]), "--json", *extra]
        argv += ["--sync-listen", f"{self.net.address(i)}:{SYNC}", "--discovery", "off"]
        argv += [arg for peer in peers for arg in ("--peer", peer)]
        out = self.logs / f"{name}.serve.out"
        with out.open("wb") as stdout, out.with_suffix(".err").open("ab") as stderr:
            proc = subprocess.Popen(self.net.command(i, argv), stdout=stdout, stderr=stderr)
        self.procs[name] = proc
        deadline = time.monotonic() + STARTED
        while time.monotonic() < deadline:
            first = out.read_bytes().partition(b"\n")
            if first[1]:
                return str(json.loads(first[0])["mcp_http"])
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        proc.kill()
        err = out.with_suffix(".err").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"memlane serve of {name} did not start: {err}")

    def pid(self, name: str) -> int:
        return self.procs[name].pid  # ``ip netns exec`` execs: the serve process itself

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

    def pause(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGSTOP)

    def resume(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGCONT)

    def close(self) -> list[tuple[str, int | None]]:
        """Stop every node (SIGCONT, then SIGTERM); each one's exit status."""
        ended: list[tuple[str, int | None]] = []
        for name, proc in self.procs.items():
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
            try:
                ended.append((name, proc.wait(timeout=60)))
            except subprocess.TimeoutExpired:
                proc.kill()
                ended.append((name, None))
        self.procs = {}
        return ended
