"""Crash safety through the MCP surface: eight ``memlane mcp`` stdio processes (the installed
command) on one data directory, each sending its 50 ``e_write`` calls at once, are killed with
SIGKILL at random moments and restarted to send what was not acknowledged.  Afterwards every
write acknowledged with a successful tool result is stored as the SR it named, and
``PRAGMA integrity_check`` is ok.

A process is killed at most ``KILLS`` times, each once it has answered a number of its writes
drawn from a seeded ``random.Random`` (the seed is printed; ``MEMLANE_CRASH_SEED`` repeats it),
the rest still in flight; its last run is left to finish.  Process scheduling still varies
between runs, so what each kill cuts does too.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

from node.identity import DB_FILE
from tests.node.clikit import make_token, ok, run

MEMLANE = Path(sys.executable).with_name("memlane")
PROCESSES = 8
WRITES = 50
KILLS = 2  # per process, at most
TIMEOUT = 30.0  # for one run of a process to answer everything or exit
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "crash", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


@dataclass
class Writer:
    """One client's 50 writes, by request id, and what was acknowledged of them."""

    name: str
    rng: random.Random
    acked: dict[int, tuple[str, str]] = field(default_factory=dict)  # id → (entry_id, sr_id)
    kills: int = 0
    cut: int = 0
    runs: int = 0

    def pending(self) -> list[int]:
        return [i for i in range(WRITES) if i not in self.acked]

    def call(self, i: int) -> dict[str, Any]:
        # Texts of up to a few pages, so the WAL grows and checkpoints happen between kills.
        text = self.rng.choice("abcdefgh") * self.rng.randrange(0, 6000)
        arguments = {"title": f"{self.name} {i} run {self.runs}", "text": text}
        params = {"name": "e_write", "arguments": arguments}
        return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}

    def take(self, line: str) -> None:
        """An answer the process wrote whole: a successful result acknowledges its write."""
        reply = json.loads(line)
        if reply.get("id") == "init":
            return
        result = reply["result"]
        assert not result["isError"], result
        answer = result["structuredContent"]
        assert reply["id"] not in self.acked, f"answered twice: {line}"
        self.acked[reply["id"]] = (answer["entry_id"], answer["sr_id"])


def _send(stdin: IO[str], messages: list[dict[str, Any]]) -> None:
    try:
        stdin.write("".join(json.dumps(m) + "\n" for m in messages))
        stdin.flush()
    except BrokenPipeError:  # killed while we wrote: what it answered is all there is
        pass


def run_once(writer: Writer, data: Path, token: str, stderr: IO[bytes]) -> None:
    """One run of ``memlane mcp``: every pending write at once, a SIGKILL after a random number
    of answers unless this run is the writer's last; each answer line read whole is taken."""
    todo = writer.pending()
    calls = [writer.call(i) for i in todo]
    writer.runs += 1
    proc = subprocess.Popen(
        [str(MEMLANE), "mcp", "--data", str(data), "--token", token],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    # The kill comes once this many answers are read, with the other writes in flight.
    kill_at = writer.rng.randrange(len(calls)) if writer.kills < KILLS else None
    watchdog = threading.Timer(TIMEOUT, proc.kill)  # a hang fails the test, never stalls it
    watchdog.start()
    try:
        _send(proc.stdin, [INITIALIZE])
        lines = [proc.stdout.readline()]
        _send(proc.stdin, [INITIALIZED, *calls])
        while len(lines) <= len(calls):
            if len(lines) - 1 == kill_at:
                proc.send_signal(signal.SIGKILL)
            if not (line := proc.stdout.readline()).endswith("\n"):
                break  # the end of its output, or a line cut by the kill
            lines.append(line)
        for line in lines:
            writer.take(line)
        if kill_at is None:
            proc.stdin.close()
            assert proc.wait(timeout=TIMEOUT) == 0
        else:
            assert proc.wait(timeout=TIMEOUT) == -signal.SIGKILL
            writer.kills += 1
            writer.cut += len(lines) <= len(calls)  # it died with writes unanswered
    finally:
        watchdog.cancel()
        proc.kill()
        proc.wait(timeout=TIMEOUT)
        proc.stdout.close()
        with suppress(BrokenPipeError):
            proc.stdin.close()


def write_until_done(writer: Writer, data: Path, token: str, stderr: Path) -> Writer:
    with stderr.open("wb") as err:
        while writer.pending():
            assert writer.runs <= KILLS, f"{writer.name}: its last run left writes unanswered"
            run_once(writer, data, token, err)
    return writer


@pytest.mark.slow
def test_acknowledged_mcp_writes_survive_sigkill(tmp_path: Path) -> None:
    seed = int(os.environ.get("MEMLANE_CRASH_SEED", random.randrange(2**32)))
    print(f"crash seed {seed} (MEMLANE_CRASH_SEED={seed} repeats the kill moments)")
    rng = random.Random(seed)
    data = tmp_path / "node"
    ok(run("init", "--data", data))
    token = make_token(data, "read:workspace", "write:workspace")
    writers = [Writer(f"w{n}", random.Random(rng.randrange(2**32))) for n in range(PROCESSES)]

    with ThreadPoolExecutor(PROCESSES) as pool:
        done = list(
            pool.map(
                lambda w: write_until_done(w, data, token, tmp_path / f"{w.name}.err"), writers
            )
        )
    kills = sum(w.kills for w in done)
    acked = {ack for w in done for ack in w.acked.values()}
    cut = sum(w.cut for w in done)
    print(f"{kills} kills ({cut} with writes in flight): {len(acked)} writes acknowledged")
    assert len(acked) == PROCESSES * WRITES  # the last runs answered everything
    assert kills >= PROCESSES

    with closing(sqlite3.connect(data / DB_FILE)) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        stored = {bytes(i).hex() for (i,) in db.execute("SELECT id FROM headers")}
        sr_ids = {i for (i,) in db.execute("SELECT sr_id FROM srs WHERE live = 1")}
    lost = sorted(e for e, _ in acked if e not in stored)
    assert not lost, f"{len(lost)} acknowledged entries lost, e.g. {lost[:3]}"
    assert {sr for _, sr in acked} <= sr_ids

    # The operator's check of the log, as after any crash.
    assert ok(run("log", "verify", "--data", data)).startswith("ok:")
