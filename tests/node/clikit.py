"""Running ``memlane`` from the tests (docs/cli.md): in-process through the command line's
entry point, or as the installed command in a real process.

``run`` calls ``node.cli.main(argv)`` in the test's own process, with the environment the
command would get, its own stdin, stdout and stderr, and the exit code a process would end
with (argparse's ``SystemExit`` included; an uncaught exception is its traceback on stderr
and 1, as the interpreter would make it); stdout and stderr are decoded as ``subprocess``
decodes a child's in text mode.  It spares each command the interpreter's start and
memlane's imports (~0.25 s of a command's ~0.3 s), and is what most CLI tests use.
``run_process`` runs the installed ``memlane`` in a real process; the tests of what only a
process shows (exit codes as a shell sees them, stdout and stderr as separate pipes, a reader
closing its pipe, the console script itself, the environment) keep using it.
"""

from __future__ import annotations

import asyncio
import fcntl
import io
import os
import pty
import re
import sqlite3
import struct
import subprocess
import sys
import termios
import threading
import traceback
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from pathlib import Path

from node.cli import main

__all__ = [
    "MEMLANE",
    "TOKEN_HINT",
    "UNAUTHENTICATED",
    "count",
    "database",
    "drawn",
    "environment",
    "fails",
    "make_token",
    "ok",
    "on_terminal",
    "run",
    "run_all",
    "run_process",
    "run_processes",
]

MEMLANE = Path(sys.executable).parent / "memlane"
UNAUTHENTICATED = "unauthenticated: a valid token is required"
TOKEN_HINT = (  # beside UNAUTHENTICATED for an operator, the same whatever the token
    "a token is valid only on the node that issued it, until it expires or is revoked "
    "(`memlane token list` there shows it)"
)
NO_HOME = Path("/nonexistent-memlane-home")
TIMEOUT = 60  # seconds a command in a real process has


def environment(extra: Mapping[str, str] | None, home: Path) -> dict[str, str]:
    """The tests' environment less MEMLANE_TOKEN, with ``home`` as XDG_DATA_HOME (never the
    real default data dir), and ``extra`` over it."""
    env = {k: v for k, v in os.environ.items() if k != "MEMLANE_TOKEN"}
    env["XDG_DATA_HOME"] = str(home)
    return env | dict(extra or {})


def run(
    *args: str | Path, env: Mapping[str, str] | None = None, home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``memlane ARGS`` in-process: its exit code, stdout and stderr."""
    argv = [str(a) for a in args]
    return _in_process(argv, environment(env, home or NO_HOME))


def run_process(
    *args: str | Path, env: Mapping[str, str] | None = None, home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``memlane ARGS`` as the installed command, in a process of its own."""
    return subprocess.run(
        [str(MEMLANE), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        env=environment(env, home or NO_HOME),
    )


def run_all(argvs: Sequence[Sequence[str]], home: Path) -> list[subprocess.CompletedProcess[str]]:
    """Several commands in-process, one after the other (they share no data dir)."""
    return [_in_process([str(a) for a in argv], environment(None, home)) for argv in argvs]


def run_processes(
    argvs: Sequence[Sequence[str]], home: Path
) -> list[subprocess.CompletedProcess[str]]:
    """Several commands at once, each the installed command in a process of its own (they
    share no data dir)."""
    procs = [
        (
            argv,
            subprocess.Popen(
                [str(MEMLANE), *argv],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=environment(None, home),
            ),
        )
        for argv in argvs
    ]
    done = []
    for argv, proc in procs:
        out, err = proc.communicate(timeout=TIMEOUT)
        done.append(subprocess.CompletedProcess(list(argv), proc.returncode, out, err))
    return done


def _in_process(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    streams = sys.stdin, sys.stdout, sys.stderr, sys.__stdout__
    saved = dict(os.environ)
    # A child's streams on pipes: UTF-8, stdout strict, stderr backslashreplace.
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    stderr = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    os.environ.clear()
    os.environ.update(env)
    sys.stdin = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    # sys.__stdout__ too: argparse wraps its help to the terminal shutil finds there, which
    # for a child writing into a pipe is none (80 columns, unless COLUMNS says otherwise).
    sys.stdout, sys.stderr, sys.__stdout__ = stdout, stderr, stdout
    try:
        code = _exit_code(argv) if not _loop_running() else _on_a_thread(argv)
    finally:
        sys.stdin, sys.stdout, sys.stderr, sys.__stdout__ = streams
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(
        [str(MEMLANE), *argv], code, _decoded(stdout), _decoded(stderr)
    )


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _on_a_thread(argv: list[str]) -> int:
    """``_exit_code`` on a thread of its own: main runs its command with ``asyncio.run``,
    which a running loop (an async test's) refuses; the test's loop waits meanwhile, as it
    waited for a process."""
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(_exit_code(argv)))
    thread.start()
    thread.join()
    return codes[0]


def _exit_code(argv: list[str]) -> int:
    """What the process running ``sys.exit(main(argv))`` would exit with."""
    try:
        return main(argv)
    except SystemExit as exit_:
        if exit_.code is None or isinstance(exit_.code, int):
            return exit_.code or 0
        print(exit_.code, file=sys.stderr)
        return 1
    except Exception:
        traceback.print_exc()
        return 1


def _decoded(stream: io.TextIOWrapper) -> str:
    """What ``subprocess`` makes of a child's output in text mode."""
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    text = buffer.getvalue().decode("utf-8")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (result.args, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    return result.stdout


def fails(result: subprocess.CompletedProcess[str], code: int = 1) -> str:
    assert result.returncode == code, (result.args, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    return result.stderr


@contextmanager
def database(data: Path) -> Iterator[sqlite3.Connection]:
    """The node's SQLite file, opened directly (committed and closed on leaving)."""
    with closing(sqlite3.connect(data / "memlane.db")) as db, db:
        yield db


def count(data: Path, table: str) -> int:
    with database(data) as db:
        return int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def make_token(data: Path, *scopes: str, principal: str = "alice") -> str:
    scope_args = [a for s in scopes or ("write:workspace",) for a in ("--scope", s)]
    out = ok(
        run(
            "token",
            "create",
            "--data",
            data,
            "--principal",
            principal,
            "--workspace",
            "team",
            *scope_args,
        )
    )
    return out.strip()


def on_terminal(argv: list[str]) -> tuple[int, str]:
    """Run ``argv`` with its stderr on a pseudo-terminal; its exit code and what it showed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    main, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    try:
        done = subprocess.run(
            argv, stdout=subprocess.PIPE, stderr=terminal, env=env, timeout=60, check=False
        )
        return done.returncode, os.read(main, 1 << 16).decode()
    finally:
        os.close(main)
        os.close(terminal)


def drawn(shown: str, phase: str) -> bool:
    """Whether a terminal was shown ``phase``'s bar, whole: ``phase  : 100%|█…█|``."""
    return re.search(rf"{phase}\s*: 100%\|█+\|", shown) is not None
