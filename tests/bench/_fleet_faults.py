"""The fleet benchmark's nemesis (tests/bench/fleet.py): a seeded schedule of real faults on
served nodes in network namespaces, each applied and healed by the kernel or by signal —

- ``kill``: SIGKILL, then the node started again;
- ``pause``: SIGSTOP, then SIGCONT;
- ``partition``: the node's link taken down (it reaches nobody);
- ``halves``: the node's packets to and from the others dropped (nftables; the link stays up,
  so connections hang rather than fail);
- ``split``: two nodes' packets to each other dropped, each still reaching the third;
- ``loss``: 20 % of the packets on the node's link dropped at random, each way;
- ``disk``: the node's data directory (a tmpfs of its own) filled to the last byte by a
  file beside it, then the file removed.

Also what the harness reads of each node while it runs: its frontier (each log's head, read
from its database file, read-only), its resident set and open descriptors (/proc).
"""

from __future__ import annotations

import errno
import os
import random
import sqlite3
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from node.identity import DB_FILE
from tests.node.fleetkit import Fleet

__all__ = ["KINDS", "Disk", "Fault", "Nemesis", "frontier", "reached", "schedule", "usage"]

KINDS = ("kill", "pause", "partition", "halves", "split", "loss", "disk")
LOSS_PERCENT = 20
# Whose agents a fault may turn away: the killed or paused node's (any call), the full disk's
# (its writes).  A network fault turns no agent away: each calls its own node.
TURNS_AWAY = {"kill": "any", "pause": "any", "disk": "writes"}

Frontier = dict[tuple[bytes, bytes], int]


@dataclass(slots=True)
class Fault:
    kind: str
    nodes: tuple[str, ...]
    start: float  # seconds from the run's start, as scheduled
    length: float
    began: float | None = None  # Unix seconds, as done
    healed: float | None = None
    target: Frontier = field(default_factory=dict)  # every node's heads at the heal
    converged: float | None = None  # Unix seconds when every node held ``target``
    behind: tuple[str, ...] = ()  # the nodes that lacked some of ``target`` at the heal

    def label(self) -> str:
        return f"{self.kind} {'/'.join(self.nodes)}"


def schedule(names: Sequence[str], disk_node: str, first: float, length: float, gap: float,
             seed: int) -> list[Fault]:  # fmt: skip
    """Each kind once, in a seeded order, ``gap`` seconds of calm between them."""
    rng = random.Random(seed)
    kinds = list(KINDS)
    rng.shuffle(kinds)
    faults = []
    for n, kind in enumerate(kinds):
        if kind == "disk":
            nodes: tuple[str, ...] = (disk_node,)
        elif kind == "split":
            nodes = tuple(sorted(rng.sample(list(names), 2)))
        else:
            nodes = (rng.choice(list(names)),)
        faults.append(Fault(kind, nodes, first + n * (length + gap), length))
    return faults


class Disk:
    """A tmpfs of ``size_mib`` at ``mount`` for one node's data directory."""

    def __init__(self, mount: Path, size_mib: int) -> None:
        self.mount = mount
        mount.mkdir(parents=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(mount)],
            check=True, capture_output=True, timeout=30,
        )  # fmt: skip
        self.filler = mount / "filler"

    def fill(self) -> None:
        """Write ``filler`` until the file system refuses (ENOSPC), a MiB then a page at a
        time."""
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            for size in (1 << 20, 4096):
                _write_until_full(fd, b"\0" * size)
        finally:
            os.close(fd)

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def close(self) -> None:
        subprocess.run(["umount", "-l", str(self.mount)], capture_output=True, timeout=60)


class Nemesis:
    """Applies and heals ``Fault``s on ``fleet`` (its ``net``), the full disk on ``disk``."""

    def __init__(self, fleet: Fleet, disk: Disk) -> None:
        self.fleet, self.disk = fleet, disk

    def apply(self, fault: Fault) -> None:
        net, index = self.fleet.net, self.fleet.names.index
        first = fault.nodes[0]
        match fault.kind:
            case "kill":
                self.fleet.kill(first)
            case "pause":
                self.fleet.pause(first)
            case "partition":
                net.cut(index(first))
            case "halves":
                for other in self.fleet.names:
                    if other != first:
                        net.split(index(first), index(other))
            case "split":
                net.split(index(fault.nodes[0]), index(fault.nodes[1]))
            case "loss":
                net.lossy(index(first), LOSS_PERCENT)
            case "disk":
                self.disk.fill()

    def heal(self, fault: Fault) -> None:
        first = fault.nodes[0]
        match fault.kind:
            case "kill":
                self.fleet.start(first)
            case "pause":
                self.fleet.resume(first)
            case "partition":
                self.fleet.net.heal(self.fleet.names.index(first))
            case "halves" | "split" | "loss":
                self.fleet.net.mend()
            case "disk":
                self.disk.free()


def _write_until_full(fd: int, chunk: bytes) -> None:
    try:
        while True:
            os.write(fd, chunk)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise


def frontier(data: Path) -> Frontier:
    """Each log's head in the node's database (read-only; a reader never waits in WAL)."""
    db = sqlite3.connect(f"file:{data / DB_FILE}?mode=ro", uri=True, timeout=10)
    try:
        rows = db.execute("SELECT writer, epoch, head_seq FROM logs").fetchall()
    finally:
        db.close()
    return {(bytes(w), bytes(e)): int(seq) for w, e, seq in rows}


def reached(held: Frontier, target: Frontier) -> bool:
    return all(held.get(log, 0) >= seq for log, seq in target.items())


def usage(pid: int) -> tuple[float, int, float] | None:
    """The process's resident set (MiB), open descriptors and CPU seconds (user and system);
    None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        stat = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    rss = [int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")]
    if not rss:  # a zombie: killed, not yet reaped
        return None
    ticks = int(stat[11]) + int(stat[12])  # utime, stime: fields 14 and 15 of stat(5)
    return rss[0] / 1024, fds, ticks / os.sysconf("SC_CLK_TCK")
