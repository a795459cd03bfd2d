"""The ``memlane`` command, end to end (docs/cli.md): real data directories, each command run
in-process through the command line's entry point (tests/node/clikit.py), and as the installed
command in a real process where that is what is looked at: a directory without a node, the
token's sources (MEMLANE_TOKEN, --token-file) and usage errors with their exit code.  Exit
codes: 0 ok, 1 refused or invalid input, 2 usage."""

from __future__ import annotations

import json
import shutil
import stat
import uuid
from pathlib import Path

import pytest

from node.identity import node_id
from protocol.signing import SigningKey
from protocol.timefmt import fixed_millis, format_instant
from tests.node.clikit import (
    TOKEN_HINT,
    UNAUTHENTICATED,
    count,
    database,
    fails,
    make_token,
    ok,
    run,
    run_process,
    run_processes,
)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "node"
    ok(run("init", "--data", path))
    return path


# -- init ----------------------------------------------------------------------------------------


def test_init_creates_a_private_node(tmp_path):
    path = tmp_path / "fresh" / "node"
    out = ok(run("init", "--data", path))
    key = SigningKey((path / "node.key").read_bytes())
    assert node_id(key.public) in out.split()
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    for name in ("node.key", "authority.key"):
        assert stat.S_IMODE((path / name).stat().st_mode) == 0o600
    seed = (path / "node.key").read_bytes()

    err = fails(run("init", "--data", path))
    assert "already" in err
    assert (path / "node.key").read_bytes() == seed  # the existing node is untouched
    assert ok(run("log", "verify", "--data", path)).startswith("ok:")


def test_init_json(tmp_path):
    path = tmp_path / "node"
    info = json.loads(ok(run("init", "--data", path, "--json")))
    key = SigningKey((path / "node.key").read_bytes())
    assert info["node_id"] == node_id(key.public)
    assert len(bytes.fromhex(info["mesh"])) == 16
    assert info["data"] == str(path)


def test_init_where_no_directory_can_be_made(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    err = fails(run("init", "--data", blocker / "node"))
    assert str(blocker) in err


def test_commands_on_a_directory_without_a_node(tmp_path):
    empty = tmp_path / "empty"
    for argv in (("token", "list"), ("log", "verify"), ("put", "--token", "mlt_x", "--title", "t")):
        err = fails(run_process(*argv, "--data", empty))
        assert "no node in" in err
        assert "memlane init" in err
    assert not empty.exists()


# -- tokens --------------------------------------------------------------------------------------


def test_token_create_list_revoke(data):
    token = make_token(data, "read:workspace", "write:workspace")
    assert token.startswith("mlt_")
    assert "\n" not in token

    rows = json.loads(ok(run("token", "list", "--data", data, "--json")))
    assert len(rows) == 1
    row = rows[0]
    assert row["token_id"].startswith("tok_")
    assert (row["principal"], row["workspace"]) == ("alice", "team")
    assert row["scopes"] == ["read:workspace", "write:workspace"]
    assert (row["expires"], row["revoked"]) == (None, None)
    listing = ok(run("token", "list", "--data", data))
    assert row["token_id"] in listing
    for shown in (json.dumps(rows), listing):
        assert token not in shown
        assert token.removeprefix("mlt_") not in shown

    assert row["token_id"] in ok(run("token", "revoke", "--data", data, row["token_id"]))
    rows = json.loads(ok(run("token", "list", "--data", data, "--json")))
    assert rows[0]["revoked"] is not None
    revoked = ok(run("token", "list", "--data", data)).splitlines()[1].rsplit("  ", 1)[1]
    assert revoked == fixed_millis(rows[0]["revoked"])  # a table's instants: three digits
    assert "no active token" in fails(run("token", "revoke", "--data", data, row["token_id"]))
    assert "no active token" in fails(run("token", "revoke", "--data", data, "tok_000000000000"))
    assert UNAUTHENTICATED in fails(run("put", "--data", data, "--token", token, "--title", "x"))


def test_token_create_refusals(data):
    base = ("token", "create", "--data", data, "--principal", "alice", "--workspace", "team")
    assert "scopes must be among" in fails(run(*base, "--scope", "root"))
    assert "invalid principal" in fails(
        run(
            "token",
            "create",
            "--data",
            data,
            "--principal",
            "a b",
            "--workspace",
            "team",
            "--scope",
            "read:workspace",
        )
    )
    assert "argument --expires: 'tomorrow' is not a duration" in fails(
        run(*base, "--scope", "read:workspace", "--expires", "tomorrow"), code=2
    )
    assert "in the future" in fails(
        run(*base, "--scope", "read:workspace", "--expires", "2001-01-01")
    )
    assert count(data, "tokens") == 0
    out = ok(run(*base, "--scope", "read:workspace", "--expires", "2999-01-01", "--json"))
    assert json.loads(out)["token"].startswith("mlt_")
    rows = json.loads(ok(run("token", "list", "--data", data, "--json")))
    assert rows[0]["expires"] == "2999-01-01T00:00:00Z"


# -- put -----------------------------------------------------------------------------------------


def test_put_prints_the_sr_id_entry_and_ingest_time(data):
    token = make_token(data)
    out = ok(
        run(
            "put",
            "--data",
            data,
            "--token",
            token,
            "--title",
            "Deploy",
            "--tags",
            "ops",
            "--tags",
            "deploy",
            "--text",
            "body",
        )
    )
    # The line write, correct and adjust print (docs/cli.md): the id, the entry, its time.
    sr_id, entry, at = out.removesuffix("\n").split("  ")
    assert uuid.UUID(sr_id).version == 7
    assert len(entry.removeprefix("entry ")) == 16
    with database(data) as db:
        rows = db.execute("SELECT sr_id, workspace, owner FROM srs WHERE live = 1").fetchall()
        written = db.execute("SELECT subject FROM audit WHERE event = 'sr_written'").fetchall()
        (ingest_ms,) = db.execute("SELECT ingest_time FROM srs").fetchone()
    assert at == f"at {format_instant(ingest_ms)}"
    assert rows == [(sr_id, "team", "alice")]
    assert written == [(sr_id,)]

    result = json.loads(ok(run("put", "--data", data, "--token", token, "--title", "t", "--json")))
    assert set(result) == {"sr_id", "entry_id", "ingest_time", "created"}
    assert result["created"] is True
    assert result["ingest_time"].endswith("Z")


def test_put_token_sources(data, tmp_path):
    token = make_token(data)
    env_out = ok(
        run_process("put", "--data", data, "--title", "via env", env={"MEMLANE_TOKEN": token})
    )
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    file_out = ok(
        run_process("put", "--data", data, "--title", "via file", "--token-file", token_file)
    )
    assert uuid.UUID(env_out.split()[0]).version == 7
    assert uuid.UUID(file_out.split()[0]).version == 7
    assert count(data, "srs") == 2
    # --token wins over the environment
    bad_env = {"MEMLANE_TOKEN": "mlt_wrong"}
    ok(run_process("put", "--data", data, "--token", token, "--title", "flag wins", env=bad_env))
    assert count(data, "srs") == 3


def test_put_refusals_store_nothing(data, tmp_path):
    token = make_token(data)
    reader = make_token(data, "read:workspace", principal="carol")
    headers, audit = count(data, "headers"), count(data, "audit")
    put = ("put", "--data", data)
    assert UNAUTHENTICATED in fails(run(*put, "--token", "mlt_bogus", "--title", "x"))
    assert "unauthenticated: no token given" in fails(run(*put, "--title", "no token at all"))
    assert UNAUTHENTICATED in fails(run(*put, "--title", "x", env={"MEMLANE_TOKEN": "nope"}))
    error = json.loads(fails(run(*put, "--token", "mlt_bogus", "--title", "x", "--json")))
    assert error == {"error": UNAUTHENTICATED, "hint": TOKEN_HINT}
    assert "write:workspace" in fails(run(*put, "--token", reader, "--title", "x"))
    assert "needs a title or a text" in fails(run(*put, "--token", token, "--tags", "lonely"))
    assert "invalid content_time: must not be before 1970-01-01" in fails(
        run(*put, "--token", token, "--title", "x", "--content-time", "1969-12-31")
    )
    assert "invalid title" in fails(run(*put, "--token", token, "--title", "x" * 1001))
    missing = tmp_path / "missing-token"
    assert str(missing) in fails(run(*put, "--token-file", missing, "--title", "x"))
    assert (count(data, "headers"), count(data, "audit")) == (headers, audit)


# -- log verify ----------------------------------------------------------------------------------


def test_a_token_of_another_node_is_refused_with_a_hint(data, tmp_path):
    """The refusal is the one every bad token gets (nothing about which tokens exist); below
    it, the same hint for all of them, saying where a token is valid."""
    other = tmp_path / "other"
    ok(run("init", "--data", other))
    theirs = make_token(other, "read:workspace")
    ok(run("timeline", "list", "--data", other, "--token", theirs))
    said = fails(run("timeline", "list", "--data", data, "--token", theirs))
    assert said == f"{UNAUTHENTICATED}\nhint: {TOKEN_HINT}\n"
    assert said == fails(run("timeline", "list", "--data", data, "--token", "mlt_nope"))
    as_json = fails(run("timeline", "list", "--data", data, "--token", theirs, "--json"))
    assert json.loads(as_json) == {"error": UNAUTHENTICATED, "hint": TOKEN_HINT}


def flip_header_byte(data: Path, kind: str, nth: int, index: int) -> None:
    """Flip one bit of byte ``index`` of the ``nth`` stored header of ``kind``."""
    with database(data) as db:
        pos, raw = db.execute(
            "SELECT pos, raw FROM headers WHERE kind = ? ORDER BY pos LIMIT 1 OFFSET ?",
            (kind, nth),
        ).fetchone()
        raw = bytearray(raw)
        raw[index] ^= 0x01
        db.execute("UPDATE headers SET raw = ? WHERE pos = ?", (bytes(raw), pos))


@pytest.fixture(scope="module")
def verified(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A node with two SRs of its own (seq 1 and 2 of its log) that verifies."""
    data = tmp_path_factory.mktemp("verify") / "node"
    ok(run("init", "--data", data))
    token = make_token(data)
    for title in ("one", "two"):
        ok(run("put", "--data", data, "--token", token, "--title", title))
    return data


def test_log_verify_ok(verified):
    assert ok(run("log", "verify", "--data", verified)).startswith("ok: 3 entries in 2 logs")
    report = json.loads(ok(run("log", "verify", "--data", verified, "--json")))
    assert (report["ok"], report["logs"], report["entries"], report["problems"]) == (
        True,
        2,
        3,
        [],
    )


@pytest.mark.parametrize(
    ("nth", "index", "problem"),
    [
        (0, -1, "seq 2: prev does not link to the entry before"),  # a signature bit, mid-log
        (1, -1, "head 2 does not match the stored entries"),  # the head's signature
        (0, 40, "seq 1: header does not match its row"),  # a bit of the writer's key
    ],
)
def test_log_verify_finds_a_flipped_byte(verified, tmp_path, nth, index, problem):
    data = tmp_path / "node"
    shutil.copytree(verified, data)
    flip_header_byte(data, "sr.put", nth, index)
    bad = run("log", "verify", "--data", data)
    assert bad.returncode == 1, (bad.stdout, bad.stderr)
    assert bad.stdout.startswith("FAILED")
    assert problem in bad.stdout
    report = json.loads(run("log", "verify", "--data", data, "--json").stdout)
    assert report["ok"] is False
    assert len(report["problems"]) == 1
    assert problem in report["problems"][0]


# -- usage and help ------------------------------------------------------------------------------


def test_usage_errors_exit_2(tmp_path):
    d = str(tmp_path / "node")
    argvs = [
        [],
        ["bogus"],
        ["token"],
        ["token", "create", "--data", d, "--workspace", "team", "--scope", "read:workspace"],
        ["token", "create", "--data", d, "--principal", "alice", "--workspace", "team"],
        ["token", "revoke", "--data", d],
        ["token", "frobnicate"],
        ["put", "--data", d, "--unknown-flag"],
        ["log"],
        ["log", "verify", "--data"],
        ["init", "--data", d, "extra"],
    ]
    for result in run_processes(argvs, tmp_path):
        err = fails(result, code=2)
        assert err.startswith("usage: memlane"), (result.args, err)
        assert "error:" in err
    assert not (tmp_path / "node").exists()
