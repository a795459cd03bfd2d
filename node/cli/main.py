"""``memlane``: argument parsing and dispatch.  Exit codes: 0 ok, 1 refused or invalid input,
2 usage, 141 stdout's reader closed it.  Every command takes the global options (``--data``,
``--config``, ``--json``, ``--token``, ``--token-file``) before or after any of its words."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
from argparse import SUPPRESS
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from typing_extensions import override

from node.allocator import one_arena
from node.cli import bundles, commands, exchange, mesh, pending, search, serving, tools
from node.cli.table import encodes, shown_path, visible_lines
from node.cli.times import expiry
from node.errors import NodeError, Unauthenticated

__all__ = ["default_data_dir", "main"]

_SIGPIPE_STATUS = 141  # 128 + SIGPIPE, as a shell reports a tool the signal ended


def default_data_dir() -> Path:
    if os.environ.get("MEMLANE_DATA"):
        return Path(os.environ["MEMLANE_DATA"])
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "memlane"


class _Version(argparse.Action):
    """``--version``: the installed package's version, read from its metadata only when asked
    (reading it costs every other command's start-up some 20 ms)."""

    @override
    def __init__(self, option_strings: Sequence[str], dest: str, **_: Any) -> None:
        super().__init__(
            option_strings,
            dest=SUPPRESS,
            default=SUPPRESS,
            nargs=0,
            help="print the version of memlane and exit",
        )

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from importlib.metadata import version

        print(f"memlane {version('memlane')}", flush=True)
        parser.exit()


_PARSER = "_memlane_parser"  # the namespace's note of the deepest command parser that ran


class _Parser(argparse.ArgumentParser):
    """memlane's parsers: a usage error is told with the usage of the command it is in, and an
    unknown command word gets the nearest command as a suggestion.  argparse hands a
    subcommand's unrecognised arguments up to the top parser, whose usage lists every
    command; each parser notes itself in the namespace so ``_parse`` can give them back."""

    @override
    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        namespace = namespace if namespace is not None else argparse.Namespace()
        setattr(namespace, _PARSER, self)  # a subcommand's parser, run later, overwrites it
        return super().parse_known_args(args, namespace)

    @override
    def _check_value(self, action: argparse.Action, value: Any) -> None:
        commands = list(action.choices or ())
        if isinstance(action, argparse._SubParsersAction) and value not in commands:
            close = difflib.get_close_matches(value, commands, n=1)
            hint = f"; did you mean {close[0]}?" if close else f" (see {self.prog} --help)"
            raise argparse.ArgumentError(None, f"{value!r} is not a {self.prog} command{hint}")
        super()._check_value(action, value)


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` parsed; arguments no parser knows are a usage error of the command they
    follow (exit 2), told with that command's usage."""
    args, extras = parser.parse_known_args(argv)
    deepest: argparse.ArgumentParser = getattr(args, _PARSER, parser)
    delattr(args, _PARSER)
    if extras:
        deepest.error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="memlane", description="a memlane node")
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True)
    init = sub.add_parser(
        "init",
        help="create a node and a new mesh in --data, or a node "
        "that joins a mesh (--join, --authority)",
    )
    init.add_argument(
        "--join",
        metavar="INVITE",
        help="join the mesh of this invite (mli1.…) instead of making a new one",
    )
    init.add_argument(
        "--authority",
        metavar="HOST:PORT",
        help="with --join: where the mesh authority accepts joins",
    )
    token = sub.add_parser("token", help="issue, list and revoke bearer tokens")
    tsub = token.add_subparsers(dest="action", required=True)
    create = tsub.add_parser("create", help="issue a token (printed once)")
    create.add_argument("--principal", required=True)
    create.add_argument("--workspace", required=True)
    create.add_argument("--scope", action="append", required=True, dest="scopes")
    create.add_argument(
        "--expires",
        type=expiry,
        metavar="WHEN",
        help="a duration from now (30m, 12h, 7d, 2w), or an instant or "
        "YYYY-MM-DD (midnight UTC); default: never",
    )
    tsub.add_parser("list", help="list tokens (never their secrets)")
    revoke = tsub.add_parser("revoke", help="revoke a token by its id")
    revoke.add_argument("token_id")
    views = sub.add_parser("views", help="the views derived from the log")
    vsub = views.add_subparsers(dest="action", required=True)
    vsub.add_parser("rebuild", help="empty every view and replay the log into it")
    config = sub.add_parser("config", help="the node's configuration")
    csub = config.add_subparsers(dest="action", required=True)
    csub.add_parser(
        "check",
        help="validate the configuration (file and MEMLANE_* variables), reporting every problem",
    )
    log = sub.add_parser("log", help="the log")
    lsub = log.add_subparsers(dest="action", required=True)
    lsub.add_parser("verify", help="re-check every chain, signature and payload hash")
    tools.add_parsers(sub, commands.tool)
    serving.add_parsers(sub)
    mesh.add_parsers(sub)
    bundles.add_parsers(sub)
    exchange.add_parsers(sub)
    search.add_parsers(sub)
    pending.add_parsers(sub)
    for each in _tree(parser):
        _add_globals(each)
    return parser


def _tree(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """The parser and every subcommand's, each once (an alias shares its command's)."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                yield from _tree(child)


def _add_globals(parser: argparse.ArgumentParser) -> None:
    """The options every command takes, on every level of the command path, so they may stand
    before or after any command word.  Unset unless given (``SUPPRESS``): a subcommand's
    parser would otherwise overwrite, with its default, a value given before its word; the
    defaults are filled in once parsing is done (``_fill_globals``)."""
    group = parser.add_argument_group("global options (before or after any command word)")
    group.add_argument(
        "--data",
        type=Path,
        metavar="DIR",
        default=SUPPRESS,
        help="the node's data directory (default: MEMLANE_DATA, else $XDG_DATA_HOME/memlane)",
    )
    group.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        default=SUPPRESS,
        help="the configuration file (default: MEMLANE_CONFIG, else config.toml in --data)",
    )
    group.add_argument(
        "--json", action="store_true", default=SUPPRESS, help="print JSON for scripts"
    )
    group.add_argument(
        "--token",
        metavar="TOKEN",
        default=SUPPRESS,
        help="the bearer token of a command that acts as a principal (or "
        "MEMLANE_TOKEN, or --token-file)",
    )
    group.add_argument(
        "--token-file",
        type=Path,
        metavar="FILE",
        default=SUPPRESS,
        help="read the token from this file's first line",
    )


def _fill_globals(args: argparse.Namespace) -> None:
    """The defaults of the global options not given."""
    if not hasattr(args, "data"):
        args.data = default_data_dir()
    if not hasattr(args, "config"):
        config = os.environ.get("MEMLANE_CONFIG")
        args.config = Path(config) if config else None
    for name, default in (("json", False), ("token", None), ("token_file", None)):
        if not hasattr(args, name):
            setattr(args, name, default)


def main(argv: Sequence[str] | None = None) -> int:
    one_arena()  # before any thread of the command's (a lookup's, a store's) allocates
    try:
        return _run(argv)
    except BrokenPipeError:
        return _reader_gone()


def _reader_gone() -> int:
    """The reader of stdout closed it (``memlane … | head``): end quietly, with the status a
    shell reports for a tool ended by SIGPIPE (128 + 13).  stdout then points at /dev/null, so
    the interpreter's last flush has nothing to fail on (the recipe of the Python docs,
    library/signal.html, "Note on SIGPIPE")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return _SIGPIPE_STATUS


def _run(argv: Sequence[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parse(build_parser(), argv)
    if (problem := _not_utf8(args, argv)) is not None:
        print(f"memlane: error: {problem}", file=sys.stderr, flush=True)
        return 2
    _fill_globals(args)
    from node.logging import configure_logging

    configure_logging(getattr(args, "log_level", "warning").upper())
    if getattr(args, "run", None) is not None:  # a long-running command (``serving``)
        code: int = args.run(args)
        return code
    name = args.command + (f"_{args.action}" if getattr(args, "action", None) else "")
    handler = getattr(args, "handler", None) or getattr(commands, name)
    try:
        import asyncio

        result: commands.Result = asyncio.run(handler(args))
    except Unauthenticated as exc:  # the refusal as over MCP, and the operator's hint
        said = {"error": exc.text, "hint": exc.HINT}
        _emit(args, said, f"{exc.text}\nhint: {exc.HINT}", stream=sys.stderr)
        return 1
    except (NodeError, OSError) as exc:  # OSError: an unreadable --token-file, an unusable --data
        _emit(args, {"error": str(exc)}, str(exc), stream=sys.stderr)
        return 1
    _emit(args, result.data, result.text)
    return result.code


def _not_utf8(args: argparse.Namespace, argv: Sequence[str]) -> str | None:
    """What is wrong with the first argument that is text and not UTF-8 (Python hands such
    bytes on as lone surrogates, which no tool, log or terminal can take), or None.  A path
    (``--data``, ``--config``, a bundle's file …: a ``Path`` once parsed) may be any bytes, as
    a path on Linux is; text that would be stored or sent may not.  A usage error."""
    bad = {value for value in _texts(vars(args).values()) if not encodes(value)}
    if not bad:
        return None
    for n, arg in enumerate(argv, 1):
        if arg in bad or arg.partition("=")[2] in bad:
            return f"argument {n} is not valid UTF-8: {os.fsencode(arg)!r}"
    return "an argument is not valid UTF-8"


def _texts(values: Iterable[Any]) -> Iterator[str]:
    """The strings among ``values`` and in their lists (a ``Path`` is not one)."""
    for value in values:
        if isinstance(value, str):
            yield value
        elif isinstance(value, list | tuple):
            yield from _texts(value)


def _emit(args: argparse.Namespace, data: Any, text: str, *, stream: Any = None) -> None:
    """The answer: JSON exactly (it escapes control characters itself), or the text with every
    control character of stored or remote data shown as its escape (docs/cli.md §Output)."""
    out = stream or sys.stdout
    data, text = shown_path(data), shown_path(text)
    shown = json.dumps(data, indent=2, sort_keys=True) if args.json else visible_lines(text)
    print(shown, file=out, flush=True)  # a closed pipe raises here, inside main
