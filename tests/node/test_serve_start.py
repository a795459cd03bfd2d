"""What ``memlane serve`` does before it serves and when it stops (docs/operations.md §Ports,
§One node per directory): a port that cannot be bound ends it with the address, the reason in
words and what sets the port — before it has dialled any peer; a second ``serve`` of a data
directory being served is refused, and the directory is free again once the first has ended,
``kill -9`` included; a ``serve`` that stops says so in its last line."""

from __future__ import annotations

import json
import re
import select
import signal
import socket
import subprocess

from tests.node.clikit import MEMLANE
from tests.node.mcpkit import TIMEOUT
from tests.node.servekit import serve, setup, stop

_QUIET = ("--mcp-http", "127.0.0.1:0", "--health-listen", "off")


def _serve(data: object, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MEMLANE), "serve", "--data", str(data), "--mcp-http", "127.0.0.1:0", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def _dialled(listener: socket.socket) -> bool:
    """Whether anyone connected to ``listener`` (a connection waits in its backlog)."""
    readable, _, _ = select.select([listener], [], [], 0.2)
    return bool(readable)


def test_a_busy_health_port_names_what_sets_it_and_no_peer_is_dialled(tmp_path):
    site = setup(tmp_path)
    with (
        socket.create_server(("127.0.0.1", 0)) as peer,
        socket.create_server(("127.0.0.1", 0)) as taken,
    ):
        peer_port, busy = peer.getsockname()[1], taken.getsockname()[1]
        done = _serve(
            site["two"],
            *("--peer", f"127.0.0.1:{peer_port}", "--sync-listen", "127.0.0.1:0"),
            *("--health-listen", f"127.0.0.1:{busy}", "--discovery", "off"),
        )
        assert not _dialled(peer), "serve dialled its peer before it failed to bind"
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert done.stderr == (
        f"memlane serve: cannot listen for health on 127.0.0.1:{busy}: the address is in use "
        "(set --health-listen, MEMLANE_HEALTH or [serve] health)\n"
    )


def test_every_busy_port_is_named_with_its_setting_and_no_python_repr(tmp_path):
    site = setup(tmp_path)
    with socket.create_server(("127.0.0.1", 0)) as taken:
        busy = f"127.0.0.1:{taken.getsockname()[1]}"
        for flag, setting in (
            ("--mcp-http", "set --mcp-http, MEMLANE_MCP_HTTP or [serve] mcp_http"),
            ("--sync-listen", "set --sync-listen, MEMLANE_SYNC_LISTEN or [mesh] listen"),
            ("--web", "set --web"),
            ("--join-listen", "set --join-listen"),
        ):
            done = _serve(site["one"], "--health-listen", "off", flag, busy)
            assert done.returncode == 1, done.stderr
            assert f"on {busy}: the address is in use ({setting})\n" in done.stderr
            assert not re.search(r"\('|\[Errno", done.stderr), done.stderr


def test_a_second_serve_of_one_directory_is_refused_until_the_first_ends(tmp_path):
    site = setup(tmp_path)
    first, _ = serve(site["one"], "--health-listen", "off")
    try:
        second = _serve(site["one"], "--health-listen", "off")
        assert second.returncode == 1, second.stderr
        assert second.stdout == ""
        assert second.stderr == (
            f"memlane serve: {site['one']} is already being served by process {first.pid}: "
            "one `memlane serve` per data directory\n"
        )
    finally:
        code, err = stop(first)
    assert code == 0, err
    again, _ = serve(site["one"], "--health-listen", "off")  # the lock went with its holder
    assert stop(again)[0] == 0


def test_a_killed_serve_leaves_no_stale_lock(tmp_path):
    site = setup(tmp_path)
    killed, _ = serve(site["one"], "--health-listen", "off")
    killed.send_signal(signal.SIGKILL)
    killed.wait(TIMEOUT)
    killed.communicate()
    after, shown = serve(site["one"], "--health-listen", "off")
    assert shown["mcp_http"].startswith("http://127.0.0.1:")
    assert stop(after)[0] == 0


def test_serve_says_when_it_stops(tmp_path):
    site = setup(tmp_path)
    running = subprocess.Popen(
        [str(MEMLANE), "serve", "--data", str(site["one"]), *_QUIET],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert running.stdout is not None
    assert running.stdout.readline().startswith("serving MCP at ")
    running.send_signal(signal.SIGINT)
    out, err = running.communicate(timeout=TIMEOUT)
    assert running.returncode == 0, err
    assert out.splitlines()[-1] == "stopped on SIGINT"
    json_run, _ = serve(site["one"], "--health-listen", "off")  # --json: one object a line
    json_run.send_signal(signal.SIGTERM)
    out, _ = json_run.communicate(timeout=TIMEOUT)
    assert json.loads(out.splitlines()[-1]) == {"stopped": "SIGTERM"}
