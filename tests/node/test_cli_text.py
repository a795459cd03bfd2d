"""What ``memlane`` prints for people (docs/cli.md §Output): every list as a
table under a header row, no Python ``None`` and no epoch milliseconds, counts with their
noun in the right number, the words of the JSON; ``put`` is ``write``.
In-process through the command line's entry point (tests/node/clikit.py)."""

from __future__ import annotations

import json
import re

from tests.node.clikit import fails, ok, run, run_all

EPOCH_MS = re.compile(r"\b1\d{12}\b")  # an instant in milliseconds, 2001 to 2286


def header(text: str) -> list[str]:
    """The columns of the table ``text`` begins with."""
    return re.split(r" {2,}", text.splitlines()[0].strip())


def readable(text: str) -> str:
    assert "None" not in text
    assert EPOCH_MS.search(text) is None, text
    return text


def test_every_list_is_a_table_with_a_header(auth, tmp_path):
    sr = json.loads(ok(run("write", "--title", "Deploy", "--text", "gateway", *auth, "--json")))
    first = readable(
        ok(run("episode", "record", "--summary", "indexed", "--tool", "search", *auth))
    )
    first_id = first.split()[0]
    assert first.startswith(f"{first_id}  prev_id —  at 20")
    second = readable(ok(run("episode", "record", "--summary", "deployed", *auth)))
    assert f"prev_id {first_id}  at 20" in second
    shown = {
        "timeline list": ["timeline", "list"],
        "timeline find": ["timeline", "find", "gateway"],
        "timeline changes": ["timeline", "changes", "--since", "2026-01-01"],
        "audit": ["audit"],
        "episode list": ["episode", "list"],
        "episode chain": ["episode", "chain", second.split()[0]],
        "token list": ["token", "list"],
        "mesh members": ["mesh", "members"],
    }
    done = dict(
        zip(shown, run_all([[*argv, *auth] for argv in shown.values()], tmp_path), strict=True)
    )
    texts = {name: readable(ok(result)) for name, result in done.items()}
    results = ["INGEST TIME", "SR ID", "TITLE"]
    assert header(texts["timeline list"]) == results
    assert header(texts["timeline find"]) == ["RANK", "SCORE", *results]  # best first
    assert texts["timeline find"].splitlines()[1].split()[0] == "1"
    assert texts["timeline list"].splitlines()[1].split()[1:] == [sr["sr_id"], "Deploy"]
    changes = texts["timeline changes"].splitlines()[1:]
    assert re.split(r" {2,}", changes[0]) == ["CHANGED AT", "CHANGE", "SR ID", "FIELDS"]
    assert header(texts["audit"]) == ["SEQ", "EVENT", "AT", "SUBJECT"]
    assert texts["audit"].splitlines()[1].split()[:2] == ["1", "sr_written"]
    episodes = ["TS", "ID", "STATUS", "TOOL", "SUMMARY"]
    assert header(texts["episode list"]) == header(texts["episode chain"]) == episodes
    listed = [re.split(r" {2,}", line) for line in texts["episode list"].splitlines()[1:3]]
    assert [row[1:] for row in listed] == [
        [second.split()[0], "recorded", "—", "deployed"],
        [first_id, "recorded", "search", "indexed"],
    ]
    tokens = ["TOKEN ID", "PRINCIPAL", "WORKSPACE", "SCOPES", "CREATED", "EXPIRES", "REVOKED"]
    assert header(texts["token list"]) == tokens
    row = re.split(r" {2,}", texts["token list"].splitlines()[1])
    assert row[1:4] == ["alice", "team", "read:workspace,write:workspace"]
    assert row[5:] == ["—", "—"]
    members = [
        "NODE ID",
        "WORKSPACES",
        "HOLDS",
        "MAX LOGS",
        "CERT EXPIRES",
        "LABEL",
        "THIS NODE",
        "ERASES",
        "REVOKED",
    ]
    assert header(texts["mesh members"]) == members
    assert re.split(r" {2,}", texts["mesh members"].splitlines()[1])[1:] == [
        "*",
        "*",
        "64",
        "9999-12-31T23:59:59.999Z",
        "—",
        "yes",
        "yes",
        "—",
    ]


def test_amend_and_forget_read_as_lines(auth):
    recorded = json.loads(ok(run("episode", "record", "--summary", "s", *auth, "--json")))
    amended = readable(
        ok(run("episode", "result", recorded["id"], "--status", "ok", "--task-result", "1", *auth))
    )
    assert re.fullmatch(
        rf"{recorded['id']}  entry [0-9a-f]{{16}}  amended status, task_result\n", amended
    )
    forgotten = ok(run("episode", "forget", recorded["id"], *auth))
    assert forgotten == f"{recorded['id']}  forgotten\n"


def test_counts_have_their_noun_in_the_right_number(tmp_path):
    data = tmp_path / "node"
    ok(run("init", "--data", data))
    assert ok(run("log", "verify", "--data", data)) == "ok: 1 entry in 1 log\n"
    assert ok(run("views", "rebuild", "--data", data)) == "views rebuilt from 1 entry\n"
    frontier = ok(run("bundle", "frontier", tmp_path / "f", "--data", data))
    assert frontier.endswith(": 1 log, 1 entry\n")


def test_put_is_write(auth, tmp_path):
    helps = run_all([["put", "--help"], ["write", "--help"]], tmp_path)
    assert ok(helps[0]) == ok(helps[1])
    made = json.loads(
        ok(
            run(
                "put",
                "--title",
                "one",
                "--links",
                "01a20000-0000-7000-8000-000000000000",
                *auth,
                "--json",
            )
        )
    )
    assert fails(run("put", "--sr-id", made["sr_id"], "--text", "two", "--lane", "x", *auth))
    updated = json.loads(ok(run("put", "--sr-id", made["sr_id"], "--text", "two", *auth, "--json")))
    assert (updated["sr_id"], updated["created"]) == (made["sr_id"], False)
    line = ok(run("put", "--title", "three", *auth))
    assert re.fullmatch(r"\S+  entry [0-9a-f]{16}  at \S+Z\n", line)


def test_instants_in_a_table_have_three_digits_of_millisecond(auth, tmp_path):
    """A column of instants lines up (``.660Z`` beside ``.661Z``, ``.000Z`` for a whole
    second); ``--json`` keeps the tool's own spelling."""
    data = auth[1]
    for expires in ("2999-01-01T00:00:00Z", "2999-01-01T00:00:00.66Z", "2999-01-01T00:00:00.661Z"):
        create = ["token", "create", "--principal", "bob", "--workspace", "team"]
        ok(run(*create, "--scope", "read:workspace", "--expires", expires, "--data", data))
    listed, as_json = run_all(
        [["token", "list", "--data", data], ["token", "list", "--data", data, "--json"]], tmp_path
    )
    rows = [re.split(r" {2,}", line) for line in readable(ok(listed)).splitlines()[1:]]
    assert [r[5] for r in rows if r[1] == "bob"] == [
        "2999-01-01T00:00:00.000Z",
        "2999-01-01T00:00:00.660Z",
        "2999-01-01T00:00:00.661Z",
    ]
    assert {len(r[4]) for r in rows} == {len("2026-10-09T11:01:24.661Z")}
    kept = [t["expires"] for t in json.loads(ok(as_json)) if t["principal"] == "bob"]
    assert kept == ["2999-01-01T00:00:00Z", "2999-01-01T00:00:00.66Z", "2999-01-01T00:00:00.661Z"]
