"""What ``memlane`` does with input that is not text, or never ends, and with
stored or remote text that holds terminal escapes (docs/cli.md §Conventions, §Output): a
one-line error and exit 1 (2 for a command line that is not UTF-8), never a traceback; text
output shows control characters as their escapes, ``--json`` keeps them exact.
In-process (tests/node/clikit.py), but the command line that is not UTF-8 in a process of the
installed command."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from node.errors import Refusal
from node.node import Node
from tests.node.clikit import MEMLANE, database, environment, fails, make_token, ok, run
from tests.node.helpers import CallerFactory

ESCAPES = "\x1b[2J\x1b[31mred\x9b\x07"  # clear the screen, turn red, a C1 CSI, the bell
SHOWN = "\\x1b[2J\\x1b[31mred\\x9b\\x07"


def one_line(stderr: str) -> str:
    assert stderr.count("\n") == 1, stderr
    return stderr.strip()


def test_an_argument_that_is_not_utf8_is_a_usage_error(auth, tmp_path):
    argv = [bytes(MEMLANE), b"write", b"--title", b"\xff", *(a.encode() for a in auth)]
    result = subprocess.run(
        argv, capture_output=True, timeout=60, check=False, env=environment(None, tmp_path)
    )
    assert result.returncode == 2, result
    assert result.stdout == b""
    assert one_line(result.stderr.decode()) == (
        "memlane: error: argument 3 is not valid UTF-8: b'\\xff'"
    )


def _bytes_run(tmp_path: Path, *argv: bytes) -> subprocess.CompletedProcess[bytes]:
    """The installed ``memlane`` with ``argv`` as bytes, as a shell passes ``$'\\xff'``."""
    return subprocess.run(
        [bytes(MEMLANE), *argv],
        capture_output=True,
        timeout=60,
        check=False,
        env=environment(None, tmp_path),
    )


def test_a_path_that_is_not_utf8_is_taken_and_shown_escaped(auth, tmp_path):
    data = os.fsencode(auth[1])
    out = os.fsencode(tmp_path) + b"/\xff.bundle"
    done = _bytes_run(tmp_path, b"bundle", b"export", b"--data", data, out)
    assert done.returncode == 0, done
    assert os.path.getsize(out) > 0
    assert done.stdout.decode().startswith(f"wrote {tmp_path}/\\xff.bundle: bundle ")
    again = _bytes_run(tmp_path, b"bundle", b"export", b"--data", data, out + b"2", b"--json")
    assert again.returncode == 0, again
    assert json.loads(again.stdout)["path"] == f"{tmp_path}/\\xff.bundle2"
    imported = _bytes_run(tmp_path, b"bundle", b"import", b"--data", data, out)
    assert imported.returncode == 0, imported


def test_data_config_token_file_and_export_paths_take_any_bytes(tmp_path):
    odd = os.fsencode(tmp_path) + b"/\xfe"
    assert _bytes_run(tmp_path, b"init", b"--data", odd).returncode == 0
    config, token_file = odd + b"/\xfd.toml", odd + b"/\xfc.token"
    Path(os.fsdecode(config)).write_text('zone = "UTC"\n')
    Path(os.fsdecode(token_file)).write_text(
        make_token(Path(os.fsdecode(odd)), "read:workspace", "write:workspace")
    )
    with_token = (b"--data", odd, b"--config", config, b"--token-file", token_file)
    listed = _bytes_run(tmp_path, b"timeline", b"list", *with_token)
    assert listed.returncode == 0, listed
    exported = _bytes_run(tmp_path, b"export", odd + b"/\xfb.jsonl", *with_token)
    assert exported.returncode == 0, exported
    assert exported.stdout.decode().startswith(f"wrote {tmp_path}/\\xfe/\\xfb.jsonl: ")
    dry = _bytes_run(tmp_path, b"import", odd + b"/\xfb.jsonl", b"--dry-run", *with_token)
    assert dry.returncode == 0, dry
    missing = _bytes_run(tmp_path, b"log", b"verify", b"--data", odd + b"/\xfa")
    assert missing.returncode == 1
    assert missing.stderr.decode() == f"no node in {tmp_path}/\\xfe/\\xfa (run " + (
        f"`memlane init --data {tmp_path}/\\xfe/\\xfa`)\n"
    )


def test_text_given_as_flag_equals_value_is_refused_too(auth, tmp_path):
    argv = [b"write", b"--title=\xff", *(a.encode() for a in auth)]
    result = _bytes_run(tmp_path, *argv)
    assert result.returncode == 2, result
    assert one_line(result.stderr.decode()) == (
        "memlane: error: argument 2 is not valid UTF-8: b'--title=\\xff'"
    )


@pytest.mark.parametrize("endless", ["/dev/zero", "/dev/urandom"])
def test_an_endless_token_file_is_refused_after_a_bounded_read(auth, endless):
    said = one_line(fails(run("timeline", "list", *auth[:2], "--token-file", endless)))
    assert said in (
        f"--token-file {endless}: its first line is longer than 4,096 bytes",
        f"--token-file {endless} is not text",
    )


def test_a_binary_token_file_is_not_text(auth, tmp_path):
    for name, content in (("bin", b"\xff\xfe\x00\n"), ("nul", b"\x00\x00\n")):
        (tmp_path / name).write_bytes(content)
        said = fails(run("timeline", "list", *auth[:2], "--token-file", tmp_path / name))
        assert one_line(said) == f"--token-file {tmp_path / name} is not text"


def test_a_token_files_first_line_is_read_from_its_first_4_kib(auth, tmp_path):
    token = tmp_path / "token"
    token.write_bytes(auth[3].encode() + b"\n" + b"\xff" * 100_000)
    ok(run("timeline", "list", *auth[:2], "--token-file", token))


def test_an_endless_passphrase_file_is_refused(auth, tmp_path):
    said = fails(
        run("archive", "create", tmp_path / "a.mla", *auth[:2], "--passphrase-file", "/dev/zero")
    )
    assert one_line(said) == "the passphrase file /dev/zero is longer than 4,096 bytes"
    assert not (tmp_path / "a.mla").exists()


def test_a_config_that_is_not_utf8_is_a_problem_of_the_configuration(auth, tmp_path):
    config = tmp_path / "config.toml"
    config.write_bytes(b'zone = "\xff"\n')
    said = fails(run("timeline", "list", *auth, "--config", config))
    assert "not UTF-8 text: byte 0xff at offset 8" in one_line(said)
    checked = run("config", "check", *auth[:2], "--config", config)
    assert (checked.returncode, checked.stdout) == (1, f"{config}: {said.split(': ', 1)[1]}")


@pytest.mark.asyncio
async def test_a_lone_surrogate_is_refused_as_an_argument_of_any_tool(
    node: Node, make_caller: CallerFactory
) -> None:
    alice = await make_caller()
    with pytest.raises(Refusal) as info:
        await node.e_write(alice, title="a\ud800b", text="t")
    assert info.value.text == (
        "invalid title: must be Unicode text: it holds a lone surrogate (U+D800) at character 1"
    )
    with pytest.raises(Refusal, match=r"^invalid tags: must be Unicode text"):
        await node.e_write(alice, title="t", tags=["ok", "\udfff"])
    with pytest.raises(Refusal, match=r"^invalid query: must be Unicode text"):
        await node.e_timeline(alice, action="find", query="\ud83d")
    assert (await node.e_timeline(alice, action="list"))["results"] == []


def test_escapes_in_a_title_reach_the_terminal_escaped_and_json_exact(auth):
    sr = json.loads(ok(run("write", "--title", ESCAPES, "--text", "x", *auth, "--json")))
    shown = ok(run("timeline", "list", *auth))
    assert "\x1b" not in shown
    assert "\x9b" not in shown
    assert "\x07" not in shown
    assert f"{sr['sr_id']}  {SHOWN}" in shown
    results = json.loads(ok(run("timeline", "list", *auth, "--json")))["results"]
    assert [r["title"] for r in results] == [ESCAPES]


def test_a_line_break_in_a_title_does_not_break_its_row(auth):
    ok(run("write", "--title", "one\ntwo\tthree", "--text", "x", *auth))
    lines = ok(run("timeline", "list", *auth)).splitlines()
    assert len(lines) == 3, lines  # the header, the row, the page
    assert lines[1].endswith("one\\ntwo\\tthree")


def test_escapes_in_a_peers_error_reach_the_terminal_escaped(auth):
    data = Path(auth[1])
    snapshot = {
        "serving": False,
        "at": 1_790_000_000_000,
        "listen": None,
        "peers": [
            {
                "node_id": "n1",
                "address": "127.0.0.1:9",
                "direction": "out",
                "state": "failed",
                "lag_in": 0,
                "lag_out": 0,
                "last_error": ESCAPES,
                "connected_at": None,
            }
        ],
    }
    with database(data) as db:
        db.execute(
            "INSERT OR REPLACE INTO state (key, value) VALUES (?, ?)",
            ("sync_peers", json.dumps(snapshot).encode()),
        )
    shown = ok(run("peers", "--data", data))
    assert "\x1b" not in shown
    assert shown.splitlines()[-1].endswith(SHOWN)
    assert json.loads(ok(run("peers", "--data", data, "--json")))["peers"][0]["last_error"] == (
        ESCAPES
    )
