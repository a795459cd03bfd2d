"""The tool commands of ``memlane`` (docs/cli.md), end to end in-process through the command
line's entry point (tests/node/clikit.py; ``--help`` of the installed command in a process):
each flag reaches the tool as its argument, answers print as tables or JSON, refusals exit 1
with the tool's exact text, usage errors exit 2."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from node.cli.main import build_parser
from tests.node.clikit import (
    count,
    database,
    fails,
    make_token,
    ok,
    run,
    run_all,
    run_processes,
)


def subcommands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    """Every command path of the parser, groups included."""
    found = [path]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, child in action.choices.items():
                if id(child) not in seen:  # an alias (put) is its command's parser
                    seen.add(id(child))
                    found += subcommands(child, (*path, name))
    return found


def test_help_on_every_command(tmp_path):
    # The installed command answers --help; every command's help is then asked of its parser
    # in this process (one interpreter start each cost ~20 s of the suite).
    (top,) = run_processes([["--help"]], tmp_path)
    assert ok(top) == _help(())
    paths = subcommands(build_parser())
    assert {("episode", "chain"), ("timeline", "changes"), ("audit",), ("write",)} <= set(paths)
    for path in paths:
        out = _help(path)
        assert out.startswith("usage: memlane " + " ".join(path)), (path, out)
        leaf = all(
            a.dest not in ("command", "action")
            for a in _parser_at(path)._actions
            if isinstance(a, argparse._SubParsersAction)
        )
        if path and leaf:
            assert "--data" in out, path
            if path not in (("mcp",), ("serve",)):
                assert "--json" in out, path


def _help(path: tuple[str, ...]) -> str:
    """What ``memlane <path> --help`` prints (it exits 0)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*path, "--help"])
    assert exited.value.code == 0
    return out.getvalue()


def _parser_at(path: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = sub.choices[name]
    return parser


COLOURS = ("red", "green", "blue", "cyan", "pink")


class Cli:
    """One data directory and one token, with the commands as calls."""

    def __init__(self, data: Path, token: str) -> None:
        self.data, self.token = data, token

    def text(self, *argv: Any) -> str:
        return ok(run(*argv, "--data", self.data, "--token", self.token))

    def json(self, *argv: Any) -> Any:
        return json.loads(self.text(*argv, "--json"))

    def refused(self, *argv: Any) -> str:
        return fails(run(*argv, "--data", self.data, "--token", self.token)).strip()


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    data = tmp_path / "node"
    ok(run("init", "--data", data))
    return Cli(data, make_token(data, "read:workspace", "write:workspace"))


def test_sr_commands_write_correct_adjust_delete_undelete_erase(cli):
    first = cli.json(
        "write",
        "--title",
        "Deploy notes",
        "--text",
        "rolled out the gateway",
        "--tag",
        "ops",
        "--content-time",
        "2026-11-01",
    )
    assert first["created"] is True
    assert uuid.UUID(first["sr_id"]).version == 7
    second = cli.text(
        "write",
        "--title",
        "Runbook",
        "--links",
        first["sr_id"],
        "--private-field",
        "pager=555",
        "--visibility",
        "private",
    )
    second_id = second.split()[0]
    assert "entry" in second
    updated = cli.json("write", "--sr-id", first["sr_id"], "--text", "rolled out gateway v2")
    assert (updated["sr_id"], updated["created"]) == (first["sr_id"], False)
    corrected = cli.json("correct", first["sr_id"], "--text", "gateway v3", "--reason", "typo")
    adjusted = cli.json("adjust", first["sr_id"], "--tags", "ops", "--tags", "gateway")
    assert corrected["sr_id"] == adjusted["sr_id"] == first["sr_id"]
    assert cli.text("delete", second_id) == f"{second_id}  deleted\n"
    assert cli.text("delete", second_id) == f"{second_id}  deleted (unchanged)\n"
    assert cli.json("undelete", second_id) == {
        "sr_id": second_id,
        "deleted": False,
        "changed": True,
    }
    with database(cli.data) as db:
        state = db.execute(
            "SELECT title, text, tags_text, private FROM srs WHERE sr_id = ?", (first["sr_id"],)
        ).fetchone()
    assert state == ("Deploy notes", "gateway v3", "ops gateway", 0)
    assert count(cli.data, "sr_links") == 1
    assert cli.refused("erase", second_id) == "e_erase needs a reason"
    erased = cli.text("erase", second_id, "--reason", "asked to be forgotten")
    assert erased.startswith(f"{second_id}  erased (1 entries named)  entry ")
    assert cli.refused("erase", second_id, "--reason", "again") == f"unknown sr_id: {second_id}"
    assert count(cli.data, "sr_links") == 0
    stored = b"".join(p.read_bytes() for p in cli.data.glob("memlane.db*"))
    assert b"Runbook" not in stored  # the command ends once its scrub is done
    assert b"runbook" not in stored
    verified = ok(run("log", "verify", "--data", cli.data))
    assert re.match(r"ok: \d+ entries in \d+ logs \(1 payload erased\)$", verified), verified


def test_sr_command_refusals_exit_1_and_store_nothing(cli):
    headers = count(cli.data, "headers")
    unknown = "00000000-0000-7000-8000-000000000001"
    assert cli.refused("correct", unknown, "--text", "x", "--reason", "r") == (
        f"unknown sr_id: {unknown}"
    )
    assert cli.refused("write", "--visibility", "public", "--title", "x").startswith(
        "invalid visibility"
    )
    assert cli.refused("write", "--private-field", "novalue", "--title", "x") == (
        "invalid private_fields: 'novalue' is not KEY=VALUE"
    )
    assert cli.refused("adjust", unknown, "--lane", "x") == f"unknown sr_id: {unknown}"
    assert count(cli.data, "headers") == headers


def test_timeline_every_action_and_changes_paging(cli):
    ids = [
        cli.json(
            "write",
            "--title",
            f"note {i}",
            "--text",
            f"alpha {COLOURS[i]}",
            "--tag",
            "even" if i % 2 == 0 else "odd",
        )["sr_id"]
        for i in range(5)
    ]
    linked = cli.json("write", "--title", "hub", "--links", ids[0], "--links", ids[1])["sr_id"]

    listed = cli.json("timeline", "list", "--page-size", "3")
    assert [r["sr_id"] for r in listed["results"]] == [linked, ids[4], ids[3]]
    assert listed["has_more"] is True
    text = cli.text("timeline", "list", "--order-by", "ingest_time_asc", "--page-size", "2")
    assert text.splitlines()[0].split() == ["INGEST", "TIME", "SR", "ID", "TITLE"]
    assert text.splitlines()[1].split()[1] == ids[0]
    assert text.splitlines()[-1] == "page 1 (2 shown, more on the next page)"

    found = cli.json("timeline", "find", "cyan")
    assert [r["sr_id"] for r in found["results"]] == [ids[3]]
    every = cli.json("timeline", "find", "cyan alpha", "--shed-idf-noise", "false")
    assert [r["sr_id"] for r in every["results"]] == ids[::-1]  # the best, in time order
    even = cli.json("timeline", "intersect", "--match", "even")
    assert {r["sr_id"] for r in even["results"]} == {ids[0], ids[2], ids[4]}
    unshed = cli.json("timeline", "intersect", "--match", "even", "--shed-idf-noise", "false")
    assert unshed["results"] == even["results"]
    near = cli.json("timeline", "traverse", linked)
    assert {r["sr_id"] for r in near["results"]} == {ids[0], ids[1]}

    first = cli.json("timeline", "changes", "--since", "2026-01-01", "--page-size", "4")
    assert (len(first["changes"]), first["has_more"]) == (4, True)
    rest = cli.json(
        "timeline",
        "changes",
        "--since",
        "2026-01-01",
        "--as-of",
        first["as_of"],
        "--page",
        "2",
        "--page-size",
        "4",
    )
    seen = [c["sr_id"] for c in first["changes"] + rest["changes"]]
    assert sorted(seen) == sorted([*ids, linked])
    assert cli.refused("timeline", "changes", "--since", "2026-01-01", "--page", "2") == (
        "a page after the first needs as_of: pass back the as_of page 1 returned, "
        "so every page reads the same window"
    )
    assert cli.refused("timeline", "find", "x", "--page-size", "500").startswith(
        "Invalid timeline spec: "
    )


def test_audit_command(cli):
    written = cli.json("write", "--title", "audited")["sr_id"]
    feed = cli.json("audit", "--since-seq", "0", "--limit", "10")
    assert [(e["event"], e["subject"]) for e in feed["events"]] == [("sr_written", written)]
    text = cli.text("audit")
    assert text.splitlines()[1].startswith("1    sr_written  ")
    assert text.splitlines()[-1] == f"feed {feed['feed_id']}, covered to seq 1"
    assert (
        cli.refused("audit", "--limit", "0") == "invalid limit: must be an integer from 1 to 1000"
    )


def test_episode_commands(cli):
    one = cli.json(
        "episode",
        "record",
        "--summary",
        "indexed",
        "--tool",
        "search",
        "--duration-ms",
        "1200",
        "--tags",
        "ops",
        "--trust",
        "0.5",
    )
    two = cli.json("episode", "record", "--summary", "deployed", "--status", "ok")
    three = cli.json("episode", "record", "--summary", "checked")
    assert (one["prev_id"], two["prev_id"], three["prev_id"]) == (None, one["id"], two["id"])
    amended = cli.json("episode", "result", one["id"], "--status", "done", "--task-result", "0.9")
    assert amended["amended"] == ["status", "task_result"]

    chain = cli.json("episode", "chain", three["id"], "--k", "2")
    assert [e["id"] for e in chain["chain"]] == [three["id"], two["id"]]
    assert chain["truncated"] is True
    concise = cli.json("episode", "chain", three["id"], "--response-format", "concise")
    assert concise["chain"][-1] == {
        "id": one["id"],
        "ts": concise["chain"][-1]["ts"],
        "status": "done",
        "eligibility": "eligible",
        "episode_type": "task",
        "tool": "search",
        "task_result": 0.9,
        "summary": "indexed",
        "tags": ["ops"],
    }
    assert cli.json("episode", "forget", two["id"]) == {"id": two["id"], "forgotten": True}
    after = cli.text("episode", "chain", three["id"])
    assert after.splitlines()[1].split()[1] == three["id"]
    assert after.splitlines()[-1] == "end"
    assert len(after.splitlines()) == 3  # the header, then it stops at the forgotten one

    listed = cli.json("episode", "list", "--tags", "ops")
    assert [e["id"] for e in listed["episodes"]] == [one["id"]]
    assert cli.text("episode", "chain", two["id"]) == (
        f"no episode {two['id']} is available to this caller\n"
    )
    assert cli.refused("episode", "chain", one["id"], "--k", "201") == (
        "invalid k: must be an integer from 1 to 200"
    )
    assert cli.refused("episode", "chain", one["id"], "--any-caller") == (
        "any_caller needs the admin:workspace scope on workspace team"
    )
    assert cli.refused("episode", "forget", two["id"]) == f"unknown episode id: {two['id']}"


def test_tool_command_usage_errors_exit_2(cli, tmp_path):
    argvs = [
        ["episode", "chain", "--data", str(cli.data)],  # the id is required
        ["episode", "chain", "x", "--k", "many", "--data", str(cli.data)],
        ["timeline", "find", "x", "--shed-idf-noise", "maybe", "--data", str(cli.data)],
        ["timeline"],
        ["episode", "frobnicate"],
    ]
    for result in run_all(argvs, tmp_path):
        err = fails(result, code=2)
        assert err.startswith("usage: memlane"), (result.args, err)


def test_tool_commands_need_a_valid_token(cli):
    said = fails(run("timeline", "list", "--data", cli.data, "--token", "mlt_nope"))
    assert said.splitlines()[0] == "unauthenticated: a valid token is required"
