"""One coroutine per CLI command; each returns what to print (text and JSON) and an exit code."""

from __future__ import annotations

import argparse
import os
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from node.address import parse_listen
from node.cli.progress import ENTRIES, bars
from node.cli.table import count, table
from node.cli.tools import ToolCommand, arguments
from node.errors import AuthError, ConfigError, Refusal
from protocol.timefmt import fixed_millis, format_instant

if TYPE_CHECKING:  # the node loads when a command opens one, not to parse a command line
    from node.config import NodeConfig
    from node.node import Node

__all__ = ["LINE_LIMIT", "Result", "load_config", "open_node", "read_prefix", "token_from_args"]

_TOKEN_KEYS = ("token_id", "principal", "workspace", "scopes", "created", "expires", "revoked")
_TOKENS = tuple(k.replace("_", " ").upper() for k in _TOKEN_KEYS)
_TOKEN_TIMES = frozenset({"created", "expires", "revoked"})
_HOW_TO_GIVE = "pass --token TOKEN, set MEMLANE_TOKEN or pass --token-file FILE"
LINE_LIMIT = 4096  # bytes read of a token or passphrase file: /dev/zero must not fill memory


@dataclass(frozen=True, slots=True)
class Result:
    data: Any
    text: str
    code: int = 0


def token_from_args(args: argparse.Namespace) -> str:
    """As every command reads it: --token, else --token-file (its first line), else
    MEMLANE_TOKEN; with none of them, a refusal that says how to give one."""
    if args.token:
        return str(args.token)
    if args.token_file:
        return _token_file(args.token_file)
    token = os.environ.get("MEMLANE_TOKEN")
    if not token:
        raise AuthError(f"unauthenticated: no token given: {_HOW_TO_GIVE}")
    return token


def read_prefix(path: Path, what: str) -> bytes:
    """At most ``LINE_LIMIT`` + 1 bytes of ``path`` (one more than a caller keeps, so it can
    tell a file that goes on); ``what`` names the file in the error."""
    try:
        with path.open("rb") as f:
            return f.read(LINE_LIMIT + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc


def _token_file(path: Path) -> str:
    head = read_prefix(path, "--token-file")
    first, newline, _ = head.partition(b"\n")
    if not newline and len(head) > LINE_LIMIT:
        raise ConfigError(
            f"--token-file {path}: its first line is longer than {LINE_LIMIT:,} bytes"
        )
    try:
        line = first.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--token-file {path} is not text") from exc
    token = line.strip()
    if not token.isprintable():  # NUL bytes (/dev/zero), other controls: no token is so
        raise ConfigError(f"--token-file {path} is not text")
    if not token:
        raise ConfigError(f"--token-file {path} holds no token")
    return token


def load_config(args: argparse.Namespace) -> NodeConfig:
    """The configuration every command uses: ``--config`` (or ``MEMLANE_CONFIG``, else the
    data directory's ``config.toml``) with the environment's ``MEMLANE_*`` overrides."""
    from node.config import NodeConfig

    return NodeConfig.load(args.data, args.config, os.environ)


def open_node(
    args: argparse.Namespace, *, embed: bool = False
) -> AbstractAsyncContextManager[Node]:
    """The node in ``--data``.  A one-shot command does not start the vector index's worker
    (``embed``): the worker would load the model and embed a batch only to be cancelled as the
    command ends — and the process would wait for that batch.  ``memlane serve`` and
    ``memlane mcp`` embed in the background; ``memlane search rebuild`` in the foreground."""
    from node.node import Node

    return Node.open(args.data, config=load_config(args), embed=embed)


async def config_check(args: argparse.Namespace) -> Result:
    """The configuration as every command reads it: the file (or, when there is none, the
    defaults) and the ``MEMLANE_*`` variables set, each problem with where it comes from."""
    from node.config import ENVIRONMENT, InvalidConfig

    path = args.config or args.data / "config.toml"
    variables = [name for name in ENVIRONMENT if name in os.environ]
    data = {"file": str(path), "exists": path.exists(), "environment": variables}
    try:
        load_config(args)
    except InvalidConfig as exc:
        data |= {"ok": False, "problems": exc.problems, "sources": exc.sources}
        return Result(data, "\n".join(exc.lines), 1)
    read = str(path) if path.exists() else f"no file at {path}: the defaults"
    also = f", with {', '.join(variables)}" if variables else ""
    return Result(data | {"ok": True, "problems": []}, f"ok: {read}{also}")


async def init(args: argparse.Namespace) -> Result:
    if args.join is not None or args.authority is not None:
        return await _join(args)
    from node.node import Node

    info = await Node.init(args.data)
    data = {"node_id": info.node_id, "mesh": info.mesh.hex(), "data": str(args.data)}
    return Result(data, f"node {info.node_id} created in {args.data} (mesh {info.mesh.hex()})")


async def _join(args: argparse.Namespace) -> Result:
    if args.join is None or args.authority is None:
        raise ConfigError("--join INVITE and --authority HOST:PORT go together")
    try:
        authority = parse_listen(args.authority)
    except ValueError as exc:
        raise ConfigError(f"--authority: {exc}") from exc
    if authority.port == 0:
        raise ConfigError(f"--authority: {args.authority!r} names no port")
    from node.mesh.join import join

    info = await join(args.data, args.join, authority.host, authority.port)
    data = {
        "node_id": info.node_id,
        "mesh": info.mesh.hex(),
        "data": str(args.data),
        "authority": args.authority,
    }
    text = (
        f"node {info.node_id} created in {args.data}: joined mesh {info.mesh.hex()} "
        f"through its authority at {args.authority}"
    )
    return Result(data, text)


async def token_create(args: argparse.Namespace) -> Result:
    async with open_node(args) as node:
        expires = None if args.expires is None else args.expires.at(node.wall())
        issued = await node.create_token(args.principal, args.workspace, args.scopes, expires)
    return Result({"token": issued.token, "token_id": issued.token_id}, issued.token)


async def token_list(args: argparse.Namespace) -> Result:
    async with open_node(args) as node:
        infos = await node.list_tokens()
    rows: list[dict[str, Any]] = [
        {
            "token_id": t.token_id,
            "principal": t.principal,
            "workspace": t.workspace,
            "scopes": list(t.scopes),
            "created": format_instant(t.created),
            "expires": format_instant(t.expires) if t.expires is not None else None,
            "revoked": format_instant(t.revoked) if t.revoked is not None else None,
        }
        for t in infos
    ]
    lines = table(_TOKENS, [[_token_cell(r, k) for k in _TOKEN_KEYS] for r in rows])
    return Result(rows, "\n".join(lines) or "no tokens")


def _token_cell(row: dict[str, Any], key: str) -> Any:
    """A token's cell: its instants with three digits of millisecond, so a column lines up."""
    value = row[key]
    return fixed_millis(value) if key in _TOKEN_TIMES and value is not None else value


async def token_revoke(args: argparse.Namespace) -> Result:
    async with open_node(args) as node:
        done = await node.revoke_token(args.token_id)
    if not done:
        raise Refusal(f"no active token with id {args.token_id}")
    return Result({"token_id": args.token_id, "revoked": True}, f"revoked {args.token_id}")


async def log_verify(args: argparse.Namespace) -> Result:
    async with open_node(args) as node:
        report = await node.verify()
    data = {
        "ok": report.ok,
        "logs": report.logs,
        "entries": report.entries,
        "payloads_absent": report.payloads_absent,
        "payloads_erased": report.payloads_erased,
        "forked_logs": report.forked_logs,
        "problems": report.problems,
    }
    head = f"{count(report.entries, 'entry', 'entries')} in {count(report.logs, 'log')}"
    if report.payloads_erased:
        head += f" ({count(report.payloads_erased, 'payload')} erased)"
    text = f"ok: {head}" if report.ok else "FAILED: " + head + "\n" + "\n".join(report.problems)
    return Result(data, text, 0 if report.ok else 1)


async def views_rebuild(args: argparse.Namespace) -> Result:
    async with open_node(args) as node:
        applied = await node.rebuild_views(progress=bars({"rebuild": ENTRIES}))
    return Result({"applied": applied}, f"views rebuilt from {count(applied, 'entry', 'entries')}")


async def tool(command: ToolCommand, args: argparse.Namespace) -> Result:
    """Any tool command: its flags become the tool's arguments."""
    sent = arguments(command, args)
    async with open_node(args) as node:
        caller = await node.authenticate(token_from_args(args))
        answer = await node.call(command.tool, caller, **sent)
    return Result(answer, command.show(answer))
