"""README.md's "Use it" runs as typed: its shell block, taken from the README as it stands,
run by bash from the repository root with ``set -euo pipefail`` — only the data directory
(``~/memlane``, a temporary one here) and the virtual environment (the one running the tests)
substituted.  Every command must succeed, and what they print must show the SR written, found
and the log verified.  Its Python snippet then runs as written, saved in a directory of its
own and run by ``python3`` in the same shell, against the node and token that block made.  Its
"Two nodes on one machine" runs the same way, with free ports for the README's: the two nodes
serve side by side and link."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.executable).parent.parent
_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.M | re.S)
_PYTHON = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def use_it_block() -> str:
    found = _BLOCK.search(section((ROOT / "README.md").read_text(encoding="utf-8"), "Use it"))
    assert found, 'README.md: no ```sh block under "## Use it"'
    return found[1]


def python_snippet() -> str:
    text = section((ROOT / "README.md").read_text(encoding="utf-8"), "Use it")
    found = _PYTHON.search(text)
    assert found, 'README.md: no ```python block under "## Use it"'
    return found[1]


def test_the_python_snippet_runs_as_written(tmp_path: Path) -> None:
    """``~`` is the temporary directory (``HOME``), so the block and the snippet run
    unchanged: the node at ``~/memlane``, the token in ``MEMLANE_TOKEN``."""
    there = tmp_path / "snippet"
    there.mkdir()
    (there / "recall.py").write_text(python_snippet(), encoding="utf-8")
    script = use_it_block().replace(".venv/", f"{VENV}/") + f"cd {there}\npython3 recall.py\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    done = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script],
        cwd=ROOT,
        env={**env, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    last = done.stdout.splitlines()[-1]
    assert re.fullmatch(r"[0-9a-f-]{36} \['a finding', 'a finding'\]", last), done.stdout
    readme = section((ROOT / "README.md").read_text(encoding="utf-8"), "Use it")
    assert "`python3 recall.py`" in readme  # it says how it is run, as it ran here


def test_use_it_runs_as_typed(tmp_path: Path) -> None:
    block = use_it_block()
    first = next(line for line in block.splitlines() if line.strip())
    assert first.startswith(". .venv/bin/activate")  # it says where memlane comes from
    script = block.replace("~/memlane", str(tmp_path / "memlane"))
    script = script.replace(".venv/", f"{VENV}/")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    done = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = r"^1\s+[\d.]+\s+\S+\s+\S+\s+a finding$"  # rank 1, its score, time, id, title
    assert re.search(found, done.stdout, re.M), done.stdout
    assert re.search(r"^ok: 3 entries in 2 logs$", done.stdout, re.M), done.stdout
    assert (tmp_path / "memlane" / "node.key").exists()


def test_a_failing_command_fails_the_block(tmp_path: Path) -> None:
    script = "set -euo pipefail\n" + use_it_block().replace("~/memlane", str(tmp_path / "m"))
    script = script.replace(".venv/", f"{VENV}/").replace("--title", "--no-such-flag", 1)
    done = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2  # memlane's usage error stops the block


def two_nodes_block() -> str:
    text = section((ROOT / "README.md").read_text(encoding="utf-8"), "Two nodes on one machine")
    found = _BLOCK.search(text)
    assert found, 'README.md: no ```sh block under "## Two nodes on one machine"'
    return found[1]


def _free_ports(block: str) -> dict[str, str]:
    """A free loopback port for each port ``block`` names (the machine may run other nodes
    on the README's ports), by the README's."""
    ports = {}
    for port in dict.fromkeys(re.findall(r"127\.0\.0\.1:(\d+)", block)):
        with socket.create_server(("127.0.0.1", 0)) as probe:
            ports[port] = str(probe.getsockname()[1])
    return ports


def _b_sees_a_live(data: Path, env: dict[str, str]) -> bool:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        shown = subprocess.run(
            [f"{VENV}/bin/memlane", "peers", "--data", str(data), "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        if any(row["state"] == "live" for row in json.loads(shown.stdout)["peers"]):
            return True
        time.sleep(0.2)
    return False


def test_two_nodes_on_one_machine_run_as_typed(tmp_path: Path) -> None:
    """The block with its data directories in ``tmp_path`` and free ports for the README's (A's
    default MCP and health ports moved with ``MEMLANE_MCP_HTTP`` and ``MEMLANE_HEALTH``): both
    nodes serve side by side, B links to A, and both stop on SIGTERM saying so."""
    block = two_nodes_block()
    ports = _free_ports(block)
    for readme, free in ports.items():
        block = block.replace(f"127.0.0.1:{readme}", f"127.0.0.1:{free}")
    script = block.replace("~/memlane", str(tmp_path / "memlane"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    env["PATH"] = f"{VENV}/bin:{env['PATH']}"  # as after `. .venv/bin/activate`
    # A serves MCP and health on the defaults: moved, as the free ports the block's curl asks
    env["MEMLANE_MCP_HTTP"] = f"127.0.0.1:{ports.get('8765', '0')}"
    env["MEMLANE_HEALTH"] = f"127.0.0.1:{ports['8766']}"
    out = tmp_path / "out"
    with out.open("w") as sink:
        shell = subprocess.Popen(
            ["bash", "-c", "set -euo pipefail\n" + script],
            cwd=ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the shell and the nodes it leaves running: one group
        )
    try:
        assert shell.wait(timeout=60) == 0, out.read_text()
        assert _b_sees_a_live(tmp_path / "memlane-b", env), out.read_text()
    finally:
        with contextlib.suppress(ProcessLookupError):  # no node left running
            os.killpg(shell.pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while out.read_text().count("stopped on SIGTERM") < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    shown = out.read_text()
    assert shown.count("stopped on SIGTERM") == 2, shown
    assert shown.count('"status": "ok"') == 2, shown  # each node's /healthz
    assert "Traceback" not in shown, shown
