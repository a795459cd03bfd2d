"""Running a child with no network: a new network namespace (``unshare -n``) with only its
loopback, brought up — so a model that reached for a hub, or anything else that sent beyond
this machine, would fail there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

__all__ = ["offline_or_skip", "run_offline"]

_UP = 'ip link set lo up && exec "$0" "$@"'


def offline_or_skip() -> None:
    """Skip (with the reason) where no network namespace can be made — but never in CI,
    where the offline checks must run."""
    reason = None
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        reason = "unshare or ip (util-linux, iproute2) is not installed"
    else:
        tried = subprocess.run(
            ["unshare", "-n", "true"], capture_output=True, text=True, timeout=30, check=False
        )
        if tried.returncode != 0:
            reason = f"unshare -n is not permitted here: {tried.stderr.strip()}"
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the offline check: {reason}")
        print(f"skipped: {reason}")
        pytest.skip(reason)


def run_offline(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``python args…`` in a namespace of its own with loopback alone."""
    return subprocess.run(
        ["unshare", "-n", "sh", "-c", _UP, sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
    )
