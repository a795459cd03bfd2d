"""The flags of ``memlane`` (docs/cli.md): only those a command's tool can take, one duration
and time form for every ``--expires``, times refused with what is wrong, and a missing token
or token file said with how to give one.  In-process (tests/node/clikit.py)."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from node.cli.tools import COMMANDS, ToolCommand, arguments
from node.errors import Refusal
from node.members import invites
from node.node import Node, system_wall
from protocol.timefmt import parse_time
from tests.node.clikit import count, fails, make_token, ok, run, run_all

HOUR, DAY = 3_600_000, 86_400_000
MISSING_OFFSET = "missing offset: add Z or ±HH:MM"
TOKEN_HINT = "pass --token TOKEN, set MEMLANE_TOKEN or pass --token-file FILE"
# The refusals that say an argument is not taken at all (as opposed to a value refused).
NOT_TAKEN = ("does not take", "unknown argument", "takes no window", "belong to the changes")
SAMPLES: dict[str, Any] = {
    "str": "x",
    "time": "2026-01-01",
    "int": 1,
    "float": 0.5,
    "bool": True,
    "list": ["x"],
    "map": {"k": "v"},
    "flag": True,
}
NEEDS = {"intersect": {"match": ["x"]}, "changes": {"since": "2026-01-01"}}


def _one_flag(command: ToolCommand, name: str) -> dict[str, Any]:
    """The arguments the command sends given its positionals, what its action needs and the
    one flag ``name``."""
    values: dict[str, Any] = {o.name: "x" if o.kind == "positional" else None for o in command.opts}
    values |= NEEDS.get(command.path[-1], {})
    (opt,) = [o for o in command.opts if o.name == name]
    values[name] = SAMPLES[opt.kind]
    return arguments(command, argparse.Namespace(**values))


def test_every_flag_is_an_argument_its_tool_takes(tmp_path: Path) -> None:
    # Each command's flags, one at a time, reach its tool: a refusal may be about the value
    # (or its scope, or an unknown id) but never that the tool does not take the argument.
    data = tmp_path / "node"

    async def call_all() -> list[tuple[str, str, str]]:
        await Node.init(data)
        async with Node.open(data) as node:
            issued = await node.create_token("alice", "team", ["admin:workspace"])
            caller = await node.authenticate(issued.token)
            refused = []
            for command in COMMANDS:
                for opt in command.opts:
                    if opt.kind == "positional":
                        continue
                    try:
                        await getattr(node, command.tool)(caller, **_one_flag(command, opt.name))
                    except Refusal as exc:
                        refused.append((" ".join(command.path), opt.name, exc.text))
            return refused

    not_taken = [r for r in asyncio.run(call_all()) if any(t in r[2] for t in NOT_TAKEN)]
    assert not_taken == []


def test_find_offers_no_window(tmp_path: Path) -> None:
    argvs = [
        ["timeline", "find", "x", flag, "2026-01-01", "--data", str(tmp_path)]
        for flag in ("--start-date", "--end-date")
    ]
    for result in run_all(argvs, tmp_path):
        assert "unrecognized arguments: --" in fails(result, code=2)
    (helped,) = run_all([["timeline", "find", "--help"]], tmp_path)
    assert "--start-date" not in ok(helped)
    assert "--order-by" in ok(helped)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "node"
    ok(run("init", "--data", path))
    return path


def test_token_and_invite_expire_alike(data: Path, tmp_path: Path) -> None:
    base = [
        "token",
        "create",
        "--data",
        str(data),
        "--principal",
        "alice",
        "--workspace",
        "team",
        "--scope",
        "read:workspace",
        "--json",
        "--expires",
    ]
    invite = ["mesh", "invite", "--data", str(data), "--json", "--expires"]
    argvs = [
        [*base, "7d"],
        [*base, "2999-01-01"],
        [*base, "2999-01-01T09:30:00+02:00"],
        [*invite, "12h"],
        [*invite, "2999-01-01"],
        [*invite, "2999-01-01T09:30:00+02:00"],
    ]
    started = system_wall()
    done = [json.loads(ok(r)) for r in run_all(argvs, tmp_path)]
    rows = json.loads(ok(run("token", "list", "--data", data, "--json")))
    week, *instants = sorted(r["expires"] for r in rows)  # made at once: in no set order
    assert abs(parse_time(week) - (started + 7 * DAY)) < 60_000
    assert instants == ["2999-01-01T00:00:00Z", "2999-01-01T07:30:00Z"]
    shown = done[3:]
    assert abs(invites.read(shown[0]["invite"]).expires - (started + 12 * HOUR)) < 60_000
    assert [s["expires"] for s in shown[1:]] == ["2999-01-01T00:00:00Z", "2999-01-01T07:30:00Z"]
    assert invites.read(shown[2]["invite"]).expires == parse_time("2999-01-01T07:30:00Z")


def test_expires_refusals(data: Path, tmp_path: Path) -> None:
    token = [
        "token",
        "create",
        "--data",
        str(data),
        "--principal",
        "alice",
        "--workspace",
        "team",
        "--scope",
        "read:workspace",
        "--expires",
    ]
    invite = ["mesh", "invite", "--data", str(data), "--expires"]
    usage = run_all(
        [[*c, v] for c in (token, invite) for v in ("tomorrow", "0h", "3x", "2999-01-01T09:30")],
        tmp_path,
    )
    for result in usage:
        err = fails(result, code=2)
        assert "argument --expires: " in err
    assert MISSING_OFFSET in usage[3].stderr
    assert MISSING_OFFSET in usage[7].stderr
    for result in run_all([[*token, "2001-01-01"], [*invite, "2001-01-01"]], tmp_path):
        assert "expires must be in the future" in fails(result)
    assert count(data, "tokens") == 0


def test_a_time_without_an_offset_says_so(data: Path, tmp_path: Path) -> None:
    token = make_token(data, "read:workspace", "write:workspace")
    auth = ["--data", str(data), "--token", token]
    argvs = [
        ["write", "--title", "x", "--content-time", "2026-10-09T08:00:00", *auth],
        ["timeline", "list", "--start-date", "2026-10-09T08:00", *auth],
        ["timeline", "changes", "--since", "2026-10-09T08:00:00.5", *auth],
        ["episode", "list", "--until", "2026-10-09T08:00:00", *auth],
        ["episode", "record", "--summary", "s", "--verdict-at", "2026-10-09T08:00", *auth],
    ]
    for result in run_all(argvs, tmp_path):
        err = fails(result, code=2)
        assert MISSING_OFFSET in err, (result.args, err)
    not_a_time = fails(run("timeline", "list", "--end-date", "yesterday", *auth), code=2)
    assert "argument --end-date: 'yesterday' is not a time" in not_a_time
    no_such_day = fails(run("timeline", "list", "--end-date", "2026-02-30", *auth), code=2)
    assert "'2026-02-30': day out of range for its month" in no_such_day
    assert count(data, "srs") == 0


def test_a_missing_token_says_how_to_give_one(data: Path, tmp_path: Path) -> None:
    nothing = fails(run("timeline", "list", "--data", data))
    assert TOKEN_HINT in nothing
    assert json.loads(fails(run("write", "--title", "x", "--data", data, "--json"))) == {
        "error": f"unauthenticated: no token given: {TOKEN_HINT}"
    }
    missing = tmp_path / "no-such-token"
    err = fails(run("timeline", "list", "--data", data, "--token-file", missing)).strip()
    assert err == f"cannot read --token-file {missing}: No such file or directory"
    empty = tmp_path / "empty-token"
    empty.write_text("\n")
    err = fails(run("timeline", "list", "--data", data, "--token-file", empty)).strip()
    assert err == f"--token-file {empty} holds no token"
    mcp = fails(run("mcp", "--data", data))
    assert TOKEN_HINT in mcp


def test_an_unknown_flag_shows_its_command_usage() -> None:
    done = run("write", "--titel", "x")
    err = fails(done, code=2)
    assert err.startswith("usage: memlane write "), err
    assert err.rstrip().endswith("memlane write: error: unrecognized arguments: --titel x")
    assert "{init,token" not in err  # not the list of every command
    nested = fails(run("token", "list", "--princpal", "a"), code=2)
    assert nested.startswith("usage: memlane token list "), nested


def test_a_mistyped_command_gets_a_suggestion() -> None:
    err = fails(run("wrte"), code=2)
    assert err.rstrip().endswith(
        "memlane: error: 'wrte' is not a memlane command; did you mean write?"
    )
    err = fails(run("token", "creat"), code=2)
    assert err.startswith("usage: memlane token "), err
    assert "'creat' is not a memlane token command; did you mean create?" in err
    err = fails(run("zzzzzz"), code=2)
    assert "'zzzzzz' is not a memlane command (see memlane --help)" in err
