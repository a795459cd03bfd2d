"""The configuration (node/config/, docs/operations.md §Configure): ``[serve]``,
``[discovery]`` and ``[search]``, the ``MEMLANE_*`` overrides, ``--config FILE``, and
``memlane config check`` reporting every problem at once; ``memlane serve`` with a bad
configuration starts nothing."""

from __future__ import annotations

import json
import subprocess

import pytest

from node.address import Listen
from node.config import InvalidConfig, NodeConfig, SearchConfig
from tests.node.clikit import MEMLANE, run
from tests.node.mcpkit import TIMEOUT
from tests.node.servekit import memlane, peers, serve, setup, stop

BAD = """\
zone = "PST"
synchronous = "SOMETIMES"
[serve]
health = "nowhere"
[discovery]
enabled = "yes"
interfaces = ["eth0"]
max_peers = 0
max_waiting = 5000
evict_after = "soon"
[search]
embedder = "endpoint"
batch = 0
"""
BAD_PROBLEMS = [
    "synchronous must be OFF, NORMAL, FULL or EXTRA",
    "zone: 'PST' is not an IANA time zone name (e.g. Europe/Berlin)",
    "serve.health: 'nowhere' is not HOST:PORT (e.g. 127.0.0.1:8765)",
    "discovery.enabled must be true or false (on or off)",
    "discovery.interfaces must be a list of IP addresses",
    "discovery.max_peers must be an integer from 1 to 256",
    "discovery.max_waiting must be an integer from 1 to 4096",
    "discovery.evict_after: 'soon' is not a duration like 30s, 5m, 2h, 1d or 1w",
    'search.url is required when search.embedder is "endpoint"',
    'search.model is required when search.embedder is "endpoint"',
    "search.batch must be an integer from 1 to 256",
]


def test_the_serving_keys_and_their_defaults():
    default = NodeConfig.from_mapping({})
    assert (default.mcp_http, default.health) == (
        Listen("127.0.0.1", 8765),
        Listen("127.0.0.1", 8766),
    )
    assert (default.discovery, default.discovery_interfaces, default.discovery_max_peers) == (
        True,
        (),
        16,
    )
    config = NodeConfig.from_mapping(
        {
            "serve": {"mcp_http": "0.0.0.0:9000", "health": "off"},
            "discovery": {"enabled": False, "interfaces": ["127.0.0.1"], "max_peers": 4},
        }
    )
    assert (config.mcp_http, config.health) == (Listen("0.0.0.0", 9000), None)
    assert (config.discovery, config.discovery_interfaces, config.discovery_max_peers) == (
        False,
        ("127.0.0.1",),
        4,
    )
    assert (default.discovery_max_waiting, default.discovery_evict_after_ms) == (64, 10_000)
    turns = NodeConfig.from_mapping({"discovery": {"max_waiting": 8, "evict_after": "1s"}})
    assert (turns.discovery_max_waiting, turns.discovery_evict_after_ms) == (8, 1000)


def test_the_search_keys_and_their_defaults():
    assert NodeConfig.from_mapping({}).search == SearchConfig(
        embedder="none",
        url=None,
        model=None,
        key_file=None,
        timeout_ms=10_000,
        batch=32,
        fusion_weight=0.25,
    )
    config = NodeConfig.from_mapping(
        {
            "search": {
                "embedder": "endpoint",
                "url": "https://embed.example",
                "model": "bge-m3",
                "timeout": "30s",
                "batch": 256,
                "fusion_weight": 0,
            }
        }
    )
    assert config.search == SearchConfig(
        "endpoint", "https://embed.example", "bge-m3", None, 30_000, 256, 0.0
    )
    assert NodeConfig.from_mapping({"search": {"embedder": "wordllama"}}).search.embedder == (
        "wordllama"
    )


def test_every_problem_is_reported_at_once():
    import tomllib

    with pytest.raises(InvalidConfig) as raised:
        NodeConfig.from_mapping(tomllib.loads(BAD), "f.toml")
    assert sorted(raised.value.problems) == sorted(BAD_PROBLEMS)
    assert str(raised.value).startswith("f.toml: ")


def test_the_environment_overrides_the_file(tmp_path):
    (tmp_path / "config.toml").write_text('[mesh]\npeers = ["10.0.0.1:7401"]\n')
    environ = {
        "MEMLANE_PEERS": "10.0.0.2:7401, 10.0.0.3:7401",
        "MEMLANE_DISCOVERY": "off",
        "MEMLANE_SYNC_LISTEN": "127.0.0.1:0",
        "MEMLANE_HEALTH": "off",
    }
    config = NodeConfig.load(tmp_path, environ=environ)
    assert config.mesh_peers == (Listen("10.0.0.2", 7401), Listen("10.0.0.3", 7401))
    assert (config.discovery, config.mesh_listen, config.health) == (
        False,
        Listen("127.0.0.1", 0),
        None,
    )
    assert NodeConfig.load(tmp_path).mesh_peers == (Listen("10.0.0.1", 7401),)
    with pytest.raises(InvalidConfig) as raised:
        NodeConfig.load(
            tmp_path, environ={"MEMLANE_DISCOVERY": "maybe", "MEMLANE_PEERS": "nowhere"}
        )
    assert "discovery.enabled must be true or false (on or off)" in raised.value.problems
    assert any(p.startswith("mesh.peers: 'nowhere'") for p in raised.value.problems)


def test_config_check_lists_every_problem(tmp_path, monkeypatch):
    monkeypatch.delenv("MEMLANE_HEALTH")  # or they would override what the file says
    monkeypatch.delenv("MEMLANE_DISCOVERY")
    bad = tmp_path / "bad.toml"
    bad.write_text(BAD)
    done = memlane("config", "check", "--data", str(tmp_path), "--config", str(bad), check=False)
    assert done.returncode == 1
    assert sorted(done.stdout.splitlines()) == sorted(f"{bad}: {p}" for p in BAD_PROBLEMS)
    shown = json.loads(
        memlane(
            "config", "check", "--data", str(tmp_path), "--config", str(bad), "--json", check=False
        ).stdout
    )
    assert shown["ok"] is False
    assert sorted(shown["problems"]) == sorted(BAD_PROBLEMS)
    good = tmp_path / "good.toml"
    good.write_text('zone = "Europe/Berlin"\n[discovery]\ninterfaces = ["127.0.0.1"]\n')
    done = memlane("config", "check", "--data", str(tmp_path), "--config", str(good))
    assert done.stdout == f"ok: {good}\n"
    missing = memlane("config", "check", "--config", str(tmp_path / "none.toml"), check=False)
    assert missing.returncode == 1
    assert "No such file or directory" in missing.stdout


def test_config_check_says_when_there_is_no_file(tmp_path):
    env = {"MEMLANE_HEALTH": "127.0.0.1:0", "MEMLANE_MCP_HTTP": "127.0.0.1:0"}
    done = run("config", "check", "--data", tmp_path / "fa", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f"ok: no file at {tmp_path / 'fa' / 'config.toml'}: the defaults, "
        "with MEMLANE_MCP_HTTP, MEMLANE_HEALTH, MEMLANE_DISCOVERY\n"
    )
    shown = json.loads(run("config", "check", "--data", tmp_path / "fa", "--json").stdout)
    assert (shown["ok"], shown["exists"]) == (True, False)
    (tmp_path / "fa").mkdir()
    (tmp_path / "fa" / "config.toml").write_text('zone = "UTC"\n')
    shown = json.loads(run("config", "check", "--data", tmp_path / "fa", "--json").stdout)
    assert (shown["ok"], shown["exists"]) == (True, True)


def test_config_check_blames_a_bad_variable_not_the_file(tmp_path):
    (tmp_path / "config.toml").write_text('zone = "PST"\n')
    env = {"MEMLANE_DISCOVERY": "maybe", "MEMLANE_HEALTH": "nowhere"}
    done = run("config", "check", "--data", tmp_path, env=env)
    assert done.returncode == 1
    assert sorted(done.stdout.splitlines()) == sorted(
        [
            "MEMLANE_DISCOVERY: discovery.enabled must be true or false (on or off)",
            "MEMLANE_HEALTH: serve.health: 'nowhere' is not HOST:PORT (e.g. 127.0.0.1:8765)",
            f"{tmp_path / 'config.toml'}: zone: 'PST' is not an IANA time zone name "
            "(e.g. Europe/Berlin)",
        ]
    )
    shown = json.loads(run("config", "check", "--data", tmp_path, "--json", env=env).stdout)
    blamed = dict(zip(shown["problems"], shown["sources"], strict=True))
    assert blamed["discovery.enabled must be true or false (on or off)"] == "MEMLANE_DISCOVERY"


def test_serve_with_a_bad_config_starts_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("MEMLANE_HEALTH")
    monkeypatch.delenv("MEMLANE_DISCOVERY")
    site = setup(tmp_path)
    (site["one"] / "config.toml").write_text(BAD)
    done = subprocess.run(
        [str(MEMLANE), "serve", "--data", str(site["one"]), "--sync-listen", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    for problem in BAD_PROBLEMS:
        assert problem in done.stderr
    (site["one"] / "config.toml").unlink()  # (every command refuses a bad configuration)
    assert peers(site["one"])["at"] is None  # sync never started


def test_serve_reads_config_from_the_named_file(tmp_path):
    site = setup(tmp_path)
    elsewhere = tmp_path / "memlane.toml"
    elsewhere.write_text('[mesh]\nlisten = "127.0.0.1:0"\n[serve]\nhealth = "off"\n')
    proc, shown = serve(site["one"], "--config", str(elsewhere))
    try:
        assert shown["sync"] is not None  # [mesh] listen from that file
        assert shown["health"] is not None  # MEMLANE_HEALTH (set for tests) beats the file
    finally:
        stop(proc)
    proc, shown = serve(site["one"], "--config", str(elsewhere), "--health-listen", "off")
    try:
        assert shown["health"] is None  # and the flag beats both
    finally:
        stop(proc)
