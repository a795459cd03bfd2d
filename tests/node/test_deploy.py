"""deploy/ (docs/operations.md): ``deploy/local-mesh.sh`` forms a three-node mesh by invite on
loopback with real ``memlane`` processes and converges; the container entrypoint makes an
authority and a member that sync; the systemd unit passes ``systemd-analyze verify``; the
container definition and the compose file hold what they must (the compose file publishes MCP
and health on the host's loopback only, and shows MCP's TLS settings); ``.dockerignore`` keeps
the virtual environment, caches and history out of the build context and nothing the image
copies; every example config passes ``memlane config check``; the shell scripts pass ``bash -n``
and, where it is installed, ``shellcheck``.  The checks of the unit, the container definition,
the compose file, ``.dockerignore`` and the configs are each also shown a broken input, so they
can fail.  ``systemd-analyze`` is installed by ``make test`` where it is missing; without it
the unit's check skips, except under ``CI=true``, where it fails."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest

from node.config import ENVIRONMENT
from tests.node.clikit import MEMLANE
from tests.node.mcpkit import TIMEOUT, read_line
from tests.node.servekit import stop

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
ROOT = DEPLOY.parent
SCRIPT_SECONDS = 120  # the script's own waits are 30 s each; it takes about 15 s here


def _run(*args: str, env: dict[str, str] | None = None, timeout: float = TIMEOUT) -> Any:
    return subprocess.run(
        args, capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE")}
    return {**clean, "MEMLANE": str(MEMLANE), "TMPDIR": str(tmp_path), **extra}


# -- deploy/local-mesh.sh ---------------------------------------------------------------------


@pytest.mark.parametrize("discovery", ["off", "on"])
def test_local_mesh_forms_by_invite_converges_and_stops(tmp_path: Path, discovery: str) -> None:
    done = _run(
        str(DEPLOY / "local-mesh.sh"),
        env=_env(tmp_path, DISCOVERY=discovery),
        timeout=SCRIPT_SECONDS,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert f"discovery: {discovery}" in out
    for step in (
        "node a is the authority",
        "node b joined the mesh by invite",
        "node c joined the mesh by invite",
        "wrote 3 SRs on node a",
    ):
        assert step in out, out
    held = re.search(r"converged: a, b and c each hold (\d+) entries in (\d+) logs", out)
    assert held, out
    assert int(held[1]) >= 3 + 3  # the SRs and the authority's member.add of a, b and c
    assert "node c reads the 3 SRs written on a" in out
    assert out.index("node c stopped") < out.index("node a stopped")
    assert out.rstrip().endswith("local-mesh: done")
    assert list(tmp_path.iterdir()) == []  # its temporary directory removed


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _taken_base() -> socket.socket:
    """A listening socket on a port whose next three (node a's join, MCP and health ports)
    are free now: so the script's first failure is the port this test holds."""
    for _ in range(50):
        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        if port < 65_000 and all(_free(port + i) for i in (1, 2, 3)):
            taken.listen()
            return taken
        taken.close()
    raise AssertionError("no port with three free ports after it")


def test_local_mesh_fails_with_its_reason(tmp_path: Path) -> None:
    with _taken_base() as taken:  # node a's sync port, in use
        port = str(taken.getsockname()[1])
        done = _run(
            str(DEPLOY / "local-mesh.sh"),
            env=_env(tmp_path, PORT_BASE=port),
            timeout=SCRIPT_SECONDS,
        )
    assert done.returncode == 1
    assert "local-mesh: FAILED: node a did not start" in done.stderr
    assert f"127.0.0.1:{port}" in done.stderr  # serve's own reason
    (kept,) = tmp_path.iterdir()  # kept for a look, and said where
    assert f"kept in {kept}" in done.stdout


@pytest.mark.parametrize("script", ["local-mesh.sh", "container-entrypoint.sh"])
def test_shell_scripts_parse_and_pass_shellcheck(script: str) -> None:
    path = DEPLOY / script
    assert os.access(path, os.X_OK)
    done = _run("bash", "-n", str(path))
    assert done.returncode == 0, done.stderr
    if shutil.which("shellcheck") is not None:
        done = _run("shellcheck", str(path))
        assert done.returncode == 0, done.stdout


# -- deploy/container-entrypoint.sh -----------------------------------------------------------


def _entrypoint(env: dict[str, str], *args: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proc = subprocess.Popen(
        [str(DEPLOY / "container-entrypoint.sh"), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = read_line(proc.stdout, TIMEOUT)
    if not line.startswith("{"):
        proc.kill()
        pytest.fail(f"the entrypoint did not serve: {line}{proc.communicate()[1]}")
    return proc, json.loads(line)


def _members(data: Path) -> set[str]:
    done = _run(str(MEMLANE), "mesh", "members", "--data", str(data), "--json")
    assert done.returncode == 0, done.stderr
    return {m["node_id"] for m in json.loads(done.stdout)}


def _live_peers(data: Path) -> set[str]:
    done = _run(str(MEMLANE), "peers", "--data", str(data), "--json")
    assert done.returncode == 0, done.stderr
    return {p["node_id"] for p in json.loads(done.stdout)["peers"] if p["state"] == "live"}


def test_entrypoint_makes_an_authority_and_a_member_that_sync(tmp_path: Path) -> None:
    loopback = {
        "MEMLANE_SYNC_LISTEN": "127.0.0.1:0",
        "MEMLANE_MCP_HTTP": "127.0.0.1:0",
        "MEMLANE_HEALTH": "127.0.0.1:0",
        "MEMLANE_DISCOVERY": "off",
    }
    a_env = _env(
        tmp_path,
        MEMLANE_DATA=str(tmp_path / "a" / "memlane"),
        MEMLANE_ROLE="authority",
        MEMLANE_JOIN_LISTEN="127.0.0.1:0",
        **loopback,
    )
    b_env = _env(tmp_path, MEMLANE_DATA=str(tmp_path / "b" / "memlane"), **loopback)
    refused = _run(str(DEPLOY / "container-entrypoint.sh"), "serve", env=b_env)
    assert refused.returncode == 1
    assert "set MEMLANE_ROLE to authority" in refused.stderr
    assert not (tmp_path / "b").exists()

    authority, shown = _entrypoint(a_env, "serve", "--json")
    running = [authority]
    try:
        # Any other command is memlane's, on the node the environment names.
        made = _run(str(DEPLOY / "container-entrypoint.sh"), "mesh", "invite", env=a_env)
        assert made.returncode == 0, made.stderr
        member, _ = _entrypoint(
            {
                **b_env,
                "MEMLANE_ROLE": "member",
                "MEMLANE_INVITE": made.stdout.strip(),
                "MEMLANE_AUTHORITY": shown["join"],
                "MEMLANE_PEERS": f" {shown['sync']},",
            },
            "--json",
        )
        running.append(member)
        a, b = tmp_path / "a" / "memlane", tmp_path / "b" / "memlane"
        mesh = _members(a)
        assert len(mesh) == 2  # the member joined with the invite
        deadline = time.monotonic() + TIMEOUT
        while not (_live_peers(a) and _live_peers(b)):
            assert time.monotonic() < deadline, "the member and the authority never synced"
            time.sleep(0.2)
        assert _live_peers(a) | _live_peers(b) == mesh
        assert _members(b) == mesh
    finally:
        codes = [stop(proc) for proc in reversed(running)]
    for code, err in codes:
        assert code == 0, err


# -- deploy/memlane.service -------------------------------------------------------------------

REQUIRED_UNIT = {
    "User": "memlane",
    "StateDirectory": "memlane",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "NoNewPrivileges": "yes",
    "PrivateTmp": "yes",
    "CapabilityBoundingSet": "",
    "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX AF_NETLINK",
    "SystemCallFilter": "@system-service",
    "Restart": "on-failure",
    "KillSignal": "SIGTERM",
}


def _unit(text: str) -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def _verify(unit: Path) -> list[str]:
    """What ``systemd-analyze verify`` says about ``unit``: its exit code does not count
    warnings (an unknown key, a value it ignores), so every line naming the unit does."""
    done = _run("systemd-analyze", "verify", str(unit))
    said = [line for line in (done.stdout + done.stderr).splitlines() if unit.name in line]
    if done.returncode != 0:
        said.append(f"exit {done.returncode}: {done.stderr.strip()}")
    return said


def _systemd_analyze() -> str:
    """``systemd-analyze``, or a skip where it is missing (a failure under ``CI=true``: CI
    runs ``make test``, which installs it)."""
    found = shutil.which("systemd-analyze")
    if found is None:
        reason = "systemd-analyze is not installed here (make test installs it with apt-get)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must verify the systemd unit: {reason}")
        pytest.skip(f"{reason}: the unit was checked for its keys")
    return found


def test_without_systemd_analyze_ci_fails_rather_than_skips(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing to find there
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must verify the systemd unit"):
        _systemd_analyze()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        _systemd_analyze()


def test_systemd_unit_is_hardened_and_verifies(tmp_path: Path) -> None:
    text = (DEPLOY / "memlane.service").read_text()
    settings = _unit(text)
    for key, value in REQUIRED_UNIT.items():
        assert value in settings.get(key, []), key
    assert int(settings["TimeoutStopSec"][0]) >= 10
    (command,) = settings["ExecStart"]
    binary, *args = command.split()
    assert args[:1] == ["serve"]
    _systemd_analyze()
    # verify wants the ExecStart binary to exist: the memlane installed beside the Python
    # running the tests (the virtual environment's) stands in for it.
    unit = tmp_path / "memlane.service"
    unit.write_text(text.replace(binary, str(MEMLANE)))
    assert _verify(unit) == []
    unit.write_text(
        text.replace(binary, str(MEMLANE)).replace("Restart=on-failure", "Restart=sometimes")
    )
    assert any("Restart" in line or "restart" in line for line in _verify(unit))


# -- deploy/Containerfile ---------------------------------------------------------------------


def _instructions(text: str) -> list[tuple[str, str]]:
    joined = re.sub(
        r"\\\n",
        " ",
        "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")),
    )
    found = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def _container_problems(text: str) -> list[str]:
    steps = _instructions(text)
    values: dict[str, list[str]] = {}
    for word, rest in steps:
        values.setdefault(word, []).append(rest)
    problems = []
    if not steps or steps[0][0] != "FROM" or not steps[0][1].startswith("python:3.11-slim"):
        problems.append("FROM python:3.11-slim first")
    users = values.get("USER", [])
    if not users or users[-1].split(":")[0] in ("root", "0"):
        problems.append("the last USER is not root")
    if "/data" not in values.get("VOLUME", []):
        problems.append("VOLUME /data")
    exposed = {p for rest in values.get("EXPOSE", []) for p in rest.split()}
    if not {"8765", "7411", "7412", "8766"} <= exposed:
        problems.append("EXPOSE the MCP, sync, join and health ports")
    health = values.get("HEALTHCHECK", [])
    if len(health) != 1 or "CMD" not in health[0] or "/healthz" not in health[0]:
        problems.append("one HEALTHCHECK asking /healthz")
    if "ENTRYPOINT" not in values or "CMD" not in values:
        problems.append("ENTRYPOINT and CMD")
    for rest in values.get("COPY", []):
        for source in rest.split()[:-1]:
            if not source.startswith("--") and not (ROOT / source).exists():
                problems.append(f"COPY {source}: not in the repository")
    return problems


def test_container_definition_holds_what_it_must() -> None:
    path = DEPLOY / "Containerfile"
    text = path.read_text()
    assert _container_problems(text) == []
    assert _container_problems(text.replace("USER memlane:memlane", "USER root")) == [
        "the last USER is not root"
    ]
    hadolint = shutil.which("hadolint")
    if hadolint is not None:
        done = _run(hadolint, str(path))
        assert done.returncode == 0, done.stdout


# -- deploy/compose.yaml ----------------------------------------------------------------------


def _blocks(lines: list[str], indent: int) -> dict[str, list[str]]:
    """The keys at ``indent`` spaces and the lines under each (a YAML subset: no parser here)."""
    out: dict[str, list[str]] = {}
    current = None
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        spaces = len(line) - len(line.lstrip())
        if spaces == indent and ":" in line:
            current = line.strip().split(":")[0]
            out[current] = []
        elif spaces > indent and current is not None:
            out[current].append(line)
    return out


def _compose_problems(text: str) -> list[str]:
    top = _blocks(text.splitlines(), 0)
    services = _blocks(top.get("services", []), 2)
    volumes = set(_blocks(top.get("volumes", []), 2))
    anchor = "\n".join(next((v for k, v in top.items() if k.startswith("x-")), []))
    problems = []
    if set(services) != {"node-a", "node-b", "node-c"}:
        problems.append(f"three services, not {sorted(services)}")
    if "healthcheck:" not in anchor or "/healthz" not in anchor:
        problems.append("the shared node settings have no /healthz healthcheck")
    entrypoint = (DEPLOY / "container-entrypoint.sh").read_text()
    known = {*ENVIRONMENT, "MEMLANE_CONFIG", "MEMLANE_DATA"}
    known |= set(re.findall(r"\$\{?(MEMLANE_\w+)", entrypoint))
    for name, lines in services.items():
        body = "\n".join(lines)
        if "<<: *node" not in body and "healthcheck:" not in body:
            problems.append(f"{name}: no healthcheck")
        mounts = re.findall(r"-\s*([\w-]+):/data\s*$", body, re.MULTILINE)
        if len(mounts) != 1 or mounts[0] not in volumes:
            problems.append(f"{name}: no named volume at /data")
        for variable in re.findall(r"(MEMLANE_\w+):", body):
            if variable not in known:
                problems.append(f"{name}: {variable} is read by neither memlane nor the entrypoint")
    roles = {n: re.findall(r"MEMLANE_ROLE:\s*(\w+)", "\n".join(b)) for n, b in services.items()}
    if roles != {"node-a": ["authority"], "node-b": ["member"], "node-c": ["member"]}:
        problems.append(f"node-a the authority, b and c members: {roles}")
    return problems + _published_problems(text, anchor, services)


MCP_PORT, HEALTH_PORT = "8765", "8766"


def _published_problems(text: str, anchor: str, services: dict[str, list[str]]) -> list[str]:
    """Every published port on the host's loopback only, each node's MCP and health among
    them and on host ports of their own, the node listening where the port leads (the
    container's interface, so plain MCP there must be accepted on purpose); and MCP's TLS
    settings shown in a commented block."""
    problems, host_ports = [], []
    for name, lines in services.items():
        settings = _blocks(lines, 4)
        published = [
            re.sub(r"^-\s*", "", line.strip()).strip("\"'") for line in settings.get("ports", [])
        ]
        for entry in published:
            if not re.fullmatch(r"127\.0\.0\.1:\d+:\d+", entry):
                problems.append(f"{name}: port {entry} is not published on 127.0.0.1 only")
        inside = {entry.rsplit(":", 1)[1] for entry in published}
        if not {MCP_PORT, HEALTH_PORT} <= inside:
            problems.append(f"{name}: MCP and health are not both published")
        host_ports += [entry.split(":")[-2] for entry in published if ":" in entry]
        env = "\n".join(settings.get("environment", []))
        for variable, port in (("MEMLANE_MCP_HTTP", MCP_PORT), ("MEMLANE_HEALTH", HEALTH_PORT)):
            if not re.search(rf"{variable}:\s*0\.0\.0\.0:{port}\s*$", env, re.MULTILINE):
                problems.append(f"{name}: {variable} is not 0.0.0.0:{port}, where its port leads")
    if len(host_ports) != len(set(host_ports)):
        problems.append(f"host ports published twice: {sorted(host_ports)}")
    if "--insecure-no-tls" not in anchor:
        problems.append(
            "plain MCP on the container's interface is refused without --insecure-no-tls"
        )
    comments = "\n".join(line for line in text.splitlines() if line.lstrip().startswith("#"))
    if not re.search(r"#\s*command:.*--tls-cert.*--tls-key", comments):
        problems.append("no commented block with MCP's TLS settings (--tls-cert, --tls-key)")
    return problems


def test_compose_runs_a_three_node_mesh() -> None:
    text = (DEPLOY / "compose.yaml").read_text()
    assert _compose_problems(text) == []
    assert "MEMLANE_AUTHORITY: node-a:7412" in text
    assert "MEMLANE_JOIN_LISTEN: 0.0.0.0:7412" in text
    assert _compose_problems(text.replace("      - node-c:/data\n", "")) == [
        "node-c: no named volume at /data"
    ]
    assert _compose_problems(text.replace("PEERS: node-a:7411\n", "PEER: node-a:7411\n")) == [
        "node-b: MEMLANE_PEER is read by neither memlane nor the entrypoint"
    ]


def test_compose_publishes_mcp_and_health_on_the_hosts_loopback_only() -> None:
    text = (DEPLOY / "compose.yaml").read_text()
    assert _compose_problems(text) == []
    assert _compose_problems(text.replace('"127.0.0.1:8776:8766"', '"8776:8766"')) == [
        "node-b: port 8776:8766 is not published on 127.0.0.1 only"
    ]
    assert _compose_problems(text.replace('"127.0.0.1:8785:8765"', '"127.0.0.1:8775:8765"')) == [
        "host ports published twice: ['8765', '8766', '8775', '8775', '8776', '8786']"
    ]
    assert _compose_problems(text.replace('      - "127.0.0.1:8786:8766"\n', "")) == [
        "node-c: MCP and health are not both published"
    ]
    only_a = text.replace(
        'MEMLANE_HEALTH: 0.0.0.0:8766\n    ports:\n      - "127.0.0.1:8765',
        'MEMLANE_HEALTH: 127.0.0.1:8766\n    ports:\n      - "127.0.0.1:8765',
    )
    assert _compose_problems(only_a) == [
        "node-a: MEMLANE_HEALTH is not 0.0.0.0:8766, where its port leads"
    ]
    assert _compose_problems(text.replace('["serve", "--insecure-no-tls"]', '["serve"]')) == [
        "plain MCP on the container's interface is refused without --insecure-no-tls"
    ]
    assert _compose_problems(text.replace("--tls-cert", "--cert")) == [
        "no commented block with MCP's TLS settings (--tls-cert, --tls-key)"
    ]


# -- .dockerignore ----------------------------------------------------------------------------

KEPT_OUT = (
    ".venv",
    ".bench-cache",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    "__pycache__",
    "node/__pycache__",
    "node/mesh/__pycache__",
    "tests/node/__pycache__",
    ".git",
    "memlane.egg-info",
    "tests/node/mcp_ts/node_modules",
    "deploy/.env",
)


def _pattern(text: str) -> re.Pattern[str]:
    """A .dockerignore pattern as a regular expression over slash-separated paths."""
    out, i = "", 0
    while i < len(text):
        if text.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif text.startswith("**", i):
            out, i = out + ".*", i + 2
        elif text[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif text[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(text[i]), i + 1
    return re.compile(out)


def _ignored(rules: str, path: str) -> bool:
    """Whether ``path`` (relative to the context) is left out: a pattern matching it or a
    directory above it, the last matching pattern deciding (``!`` brings it back)."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    ignored = False
    for line in rules.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keep = line.startswith("!")
        pattern = _pattern(line.lstrip("!").strip("/"))
        if any(pattern.fullmatch(prefix) for prefix in prefixes):
            ignored = not keep
    return ignored


def _copied() -> list[str]:
    """Every file the Containerfile copies from the context."""
    files = []
    for word, rest in _instructions((DEPLOY / "Containerfile").read_text()):
        for source in rest.split()[:-1] if word == "COPY" else []:
            path = ROOT / source
            found = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
            files += [str(p.relative_to(ROOT)) for p in found if "__pycache__" not in p.parts]
    return files


def _dockerignore_problems(rules: str) -> list[str]:
    problems = [f"{path} is sent to the build" for path in KEPT_OUT if not _ignored(rules, path)]
    problems += [
        f"{path} is copied by the Containerfile but left out"
        for path in _copied()
        if _ignored(rules, path)
    ]
    return problems


def test_dockerignore_keeps_the_build_context_to_the_sources() -> None:
    rules = (ROOT / ".dockerignore").read_text()
    assert len(_copied()) > 20  # pyproject.toml, README.md, protocol/, node/, the entrypoint
    assert _dockerignore_problems(rules) == []
    assert _dockerignore_problems(rules.replace("**/__pycache__\n", "__pycache__\n")) == [
        "node/__pycache__ is sent to the build",
        "node/mesh/__pycache__ is sent to the build",
        "tests/node/__pycache__ is sent to the build",
    ]
    assert _dockerignore_problems(rules + "!.venv\n") == [".venv is sent to the build"]
    assert _dockerignore_problems(rules + "README*\n") == [
        "README.md is copied by the Containerfile but left out"
    ]


# -- deploy/examples --------------------------------------------------------------------------


def _config_check(path: Path, data: Path) -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE")}
    return _run(
        str(MEMLANE),
        "config",
        "check",
        "--config",
        str(path),
        "--data",
        str(data),
        "--json",
        env=env,
    )


def test_example_configs_pass_config_check(tmp_path: Path) -> None:
    examples = sorted((DEPLOY / "examples").glob("*.toml"))
    assert {p.stem for p in examples} >= {"authority", "member", "static-peers"}
    for path in examples:
        text = path.read_text()
        tomllib.loads(text)
        assert text.startswith("#")  # each says what it is for
        done = _config_check(path, tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["ok"]
    broken = tmp_path / "broken.toml"
    broken.write_text("synchronus = 1\n" + (DEPLOY / "examples" / "member.toml").read_text())
    done = _config_check(broken, tmp_path)
    assert done.returncode == 1
    assert "unknown key 'synchronus'" in json.loads(done.stdout)["problems"]
