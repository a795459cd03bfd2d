"""A network of our own for served nodes: one Linux network namespace per node, each joined
by a veth pair to a bridge in this namespace, on a private /24 that exists only here — so a
partition is a link taken down by the kernel, not a mock; a split between two nodes (each
still reaching the others) and packet loss on a node's link are nftables rules in its
namespace.  Made and removed by ``Network`` (root only; without it, or without ``ip``, a
skip — a failure under ``CI=true``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence

import pytest

__all__ = ["Network", "network_or_skip"]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def network_or_skip() -> None:
    """Skip (with the reason) where namespaces cannot be made — never under ``CI=true``."""
    reason = None
    if shutil.which("ip") is None:
        reason = "ip (iproute2) is not installed"
    elif shutil.which("nft") is None:
        reason = "nft (nftables) is not installed (make test installs it with apt-get)"
    elif os.geteuid() != 0:
        reason = "network namespaces need root"
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the fleet check: {reason}")
        print(f"skipped: {reason}")
        pytest.skip(reason)


class Network:
    """``n`` namespaces on a bridge: node ``i`` at ``address(i)``; ``cut(i)`` and ``heal(i)``
    take its link down and up; ``close`` removes everything it made."""

    def __init__(self, n: int) -> None:
        tag = f"ml{os.getpid() % 100_000}"
        self.bridge, self.subnet = f"{tag}b", f"10.213.{os.getpid() % 250}"
        self.spaces = [f"{tag}n{i}" for i in range(n)]
        self.links = [f"{tag}v{i}" for i in range(n)]
        self._drops: list[set[str]] = [set() for _ in range(n)]
        self._loss = [0] * n
        try:
            self._make()
        except BaseException:
            self.close()
            raise

    def _make(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i, (space, link) in enumerate(zip(self.spaces, self.links, strict=True)):
            _ip("netns", "add", space)
            _ip("link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", space)
            _ip("link", "set", link, "master", self.bridge, "up")
            _ip("-n", space, "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
            _ip("-n", space, "link", "set", "eth0", "up")
            _ip("-n", space, "link", "set", "lo", "up")

    def address(self, i: int) -> str:
        return f"{self.subnet}.{10 + i}"

    def command(self, i: int, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside node ``i``'s namespace."""
        return ["ip", "netns", "exec", self.spaces[i], *argv]

    def cut(self, i: int) -> None:
        _ip("link", "set", self.links[i], "down")

    def heal(self, i: int) -> None:
        _ip("link", "set", self.links[i], "up")

    def split(self, i: int, j: int) -> None:
        """Drop every packet between nodes ``i`` and ``j`` (both still reach the rest)."""
        self._drops[i].add(self.address(j))
        self._drops[j].add(self.address(i))
        self._rules(i)
        self._rules(j)

    def lossy(self, i: int, percent: int) -> None:
        """Drop ``percent`` % of the packets on node ``i``'s link, each way, at random."""
        self._loss[i] = percent
        self._rules(i)

    def mend(self) -> None:
        """Take every split and loss away."""
        for i in range(len(self.spaces)):
            self._drops[i], self._loss[i] = set(), 0
            self._rules(i)

    def _rules(self, i: int) -> None:
        inward, outward = [], []
        for address in sorted(self._drops[i]):
            inward.append(f"ip saddr {address} drop")
            outward.append(f"ip daddr {address} drop")
        if self._loss[i]:
            inward.append(f'iifname "eth0" numgen random mod 100 < {self._loss[i]} drop')
            outward.append(f'oifname "eth0" numgen random mod 100 < {self._loss[i]} drop')
        ruleset = "flush ruleset\n"
        if inward:
            ruleset += (
                "table inet fleet {\n"
                f"  chain in {{ type filter hook input priority 0; {'; '.join(inward)}; }}\n"
                f"  chain out {{ type filter hook output priority 0; {'; '.join(outward)}; }}\n"
                "}\n"
            )
        subprocess.run(
            ["ip", "netns", "exec", self.spaces[i], "nft", "-f", "-"],
            input=ruleset, capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip

    def close(self) -> None:
        for space in self.spaces:
            _ip("netns", "del", space, check=False)  # its end of the veth goes with it
        _ip("link", "del", self.bridge, check=False)
