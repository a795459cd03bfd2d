"""The long-running commands (docs/mcp.md, docs/cli.md): ``memlane mcp`` (MCP over stdio, one
principal) and ``memlane serve`` (the node: MCP over streamable HTTP with a bearer token per
request, sync, discovery, health and metrics).

``memlane serve`` runs sync with the mesh when ``[mesh] listen`` or ``[mesh] peers`` is
configured (or ``--sync-listen`` / ``--peer`` is given): mutual TLS with this node's
certificate (``node.mesh.service``), and, unless ``[discovery] enabled = false`` or
``--discovery off``, zeroconf discovery of the mesh's other nodes.  It answers ``/healthz`` and
``/metrics`` on ``[serve] health`` (``node.serve.health``).  On the authority node,
``--join-listen`` also accepts joins (``node.mesh.join``, docs/mesh.md §Joining).  The
configuration is read first, whole (the file, ``MEMLANE_*``, then flags); with any problem
every one is reported and nothing starts.

Both stop cleanly on SIGTERM or SIGINT: serving ends (discovery says goodbye, sync says bye on
every link, then MCP and health stop), then the store is closed.  Exit codes as for every
command: 0 ok, 1 refused or invalid input (a bad token or configuration, no node, a port in
use, a member node without its certificate), 2 usage (including plain HTTP off loopback
without ``--insecure-no-tls``), 141 once stdout's reader has closed it.  The MCP SDK is
loaded only by these two commands, so the others start quickly.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import signal
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from node.address import DEFAULT_HEALTH, DEFAULT_LISTEN, Listen, Tls, parse_listen
from node.cli.commands import load_config, token_from_args
from node.cli.table import shown_path
from node.errors import NodeError, Unauthenticated

if TYPE_CHECKING:  # the node loads when a server starts, not to parse a command line
    from node.config import NodeConfig
    from node.mesh.join import JoinService
    from node.mesh.service import DiscoverySettings, SyncService
    from node.mesh.sync import SyncOptions
    from node.node import Node
    from node.serve.health import HealthEndpoint

__all__ = ["add_parsers", "run_mcp", "run_serve"]

_MCP_HELP = "serve MCP over stdin/stdout, acting as one token's principal"
_SERVE_HELP = "run the node: MCP over streamable HTTP, a bearer token on every request"


def _log_level(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default=default,
        help=f"what goes to the log on stderr (default: {default})",
    )


def add_parsers(sub: Any) -> None:
    """Register ``mcp`` and ``serve`` on the ``memlane`` subcommands."""
    mcp = sub.add_parser(
        "mcp",
        help=_MCP_HELP,
        description=_MCP_HELP
        + (
            ". stdout carries the protocol; logs go to stderr. A token that is invalid at start-up "
            "exits 1; one revoked later is refused call by call."
        ),
    )
    mcp.set_defaults(run=run_mcp)
    _log_level(mcp, "warning")
    serve = sub.add_parser(
        "serve",
        help=_SERVE_HELP,
        description=_SERVE_HELP
        + (". Prints the endpoint's URL once listening. Off loopback, TLS is required."),
    )
    _log_level(serve, "info")
    serve.add_argument(
        "--mcp-http",
        metavar="HOST:PORT",
        type=_listen,
        help=f"where to serve MCP (default: [serve] mcp_http, else "
        f"{DEFAULT_LISTEN}; port 0 picks one; IPv6 as [::1]:8765)",
    )
    serve.add_argument(
        "--web",
        metavar="HOST:PORT",
        type=_listen,
        help="also serve the read-only web view here (docs/web.md; default: "
        "none; port 0 picks one; off loopback, TLS as for MCP)",
    )
    serve.add_argument(
        "--health-listen",
        metavar="HOST:PORT",
        type=_listen_or_off,
        help=f"where to answer /healthz and /metrics, or off (default: [serve] "
        f"health, else {DEFAULT_HEALTH}; port 0 picks one)",
    )
    serve.add_argument(
        "--discovery",
        choices=("on", "off"),
        help="advertise and find nodes of this mesh with zeroconf while sync "
        "runs (default: [discovery] enabled, else on)",
    )
    serve.add_argument(
        "--tls-cert",
        type=Path,
        metavar="FILE",
        help="PEM certificate chain for HTTPS (with --tls-key)",
    )
    serve.add_argument(
        "--tls-key", type=Path, metavar="FILE", help="PEM private key for HTTPS (with --tls-cert)"
    )
    serve.add_argument(
        "--insecure-no-tls",
        action="store_true",
        help="allow plain HTTP on an address off loopback: bearer tokens then "
        "cross the network in clear",
    )
    serve.add_argument(
        "--sync-listen",
        metavar="HOST:PORT",
        type=_listen,
        help="accept sync connections from the mesh here (instead of [mesh] "
        "listen; port 0 picks one)",
    )
    serve.add_argument(
        "--peer",
        metavar="HOST:PORT",
        type=_peer,
        action="append",
        dest="peers",
        help="a node to dial and keep connected; repeat for several (instead of [mesh] peers)",
    )
    serve.add_argument(
        "--join-listen",
        metavar="HOST:PORT",
        type=_listen,
        help="on the mesh authority: accept joins (memlane init --join) here; port 0 picks one",
    )
    serve.set_defaults(run=run_serve)


def _listen(text: str) -> Listen:
    try:
        return parse_listen(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _listen_or_off(text: str) -> Listen | str:
    return text if text == "off" else _listen(text)


def _peer(text: str) -> Listen:
    address = _listen(text)
    if address.port == 0:
        raise argparse.ArgumentTypeError(f"{text!r} names no port")
    return address


def _fail(args: argparse.Namespace, message: str, code: int, *, hint: str | None = None) -> int:
    """``message`` on stderr (``--json``: ``{"error": …}``), and ``hint``, if any, below it
    (``"hint"``)."""
    message = shown_path(message)  # a --data that is not UTF-8, say
    if args.json:
        text = json.dumps({"error": message} | ({"hint": hint} if hint else {}))
    else:
        text = f"memlane {args.command}: {message}" + (f"\nhint: {hint}" if hint else "")
    print(text, file=sys.stderr)
    return code


async def _until_signalled(
    *alternatives: Awaitable[Any], ready: Callable[[], None] = lambda: None
) -> str:
    """Wait for SIGTERM or SIGINT, or for any of ``alternatives`` to end (its error raised);
    the signal's name, or ``""`` when an alternative ended.  ``ready`` runs once the signals
    are caught, so a signal sent as soon as it has run ends the wait cleanly."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    caught: list[str] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _catch, stop, caught, sig.name)
    ready()
    waits = [asyncio.ensure_future(a) for a in alternatives]
    signalled = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait([signalled, *waits], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
        return caught[0] if caught else ""
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        signalled.cancel()


def _catch(stop: asyncio.Event, caught: list[str], name: str) -> None:
    caught.append(name)
    stop.set()


# -- memlane mcp ------------------------------------------------------------------------------


def run_mcp(args: argparse.Namespace) -> int:
    try:
        asyncio.run(_mcp(args.data, load_config(args), token_from_args(args)))
    except Unauthenticated as exc:
        given = f"{exc.text} (pass --token, MEMLANE_TOKEN or --token-file)"
        return _fail(args, given, 1, hint=exc.HINT)
    except BrokenPipeError:  # the client closed stdout: main's quiet exit
        raise
    except (NodeError, OSError) as exc:  # no node in --data, an unreadable --token-file
        return _fail(args, str(exc), 1)
    return 0


async def _mcp(data: Path, config: NodeConfig, token: str | None) -> None:
    from node.node import Node

    async with Node.open(data, config=config) as node:
        await node.authenticate(token)
        assert token is not None
        from node.mcp.stdio import serve_stdio

        serving = asyncio.ensure_future(serve_stdio(node, token))
        try:
            await _until_signalled(serving)
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)


# -- memlane serve ----------------------------------------------------------------------------


def run_serve(args: argparse.Namespace) -> int:
    from node.config import InvalidConfig

    try:
        config = load_config(args)
    except InvalidConfig as exc:  # nothing started: every problem, one per line
        return _fail(args, "\n".join(exc.lines), 1)
    listen: Listen = args.mcp_http or config.mcp_http
    if (args.tls_cert is None) != (args.tls_key is None):
        return _fail(args, "--tls-cert and --tls-key go together", 2)
    tls = Tls(args.tls_cert, args.tls_key) if args.tls_cert else None
    for where in (listen, args.web):
        if where is not None and tls is None and not where.loopback and not args.insecure_no_tls:
            return _fail(
                args,
                (
                    f"refusing plain HTTP on {where.host}, which is not a loopback address: bearer "
                    "tokens would cross the network in clear. Give --tls-cert and --tls-key, or "
                    "--insecure-no-tls to accept that"
                ),
                2,
            )
    try:
        stopped = asyncio.run(_serve(args, config, listen, tls))
    except BrokenPipeError:  # stdout's reader went away: main's quiet exit
        raise
    except (NodeError, OSError) as exc:  # no node, a port in use, a certificate that won't load
        return _fail(args, str(exc), 1)
    _stopped(args, stopped)
    return 0


async def _serve(
    args: argparse.Namespace, config: NodeConfig, listen: Listen, tls: Tls | None
) -> str:
    """Serve until a signal; what stopped it.  The data directory's lock is taken and every
    port bound before the node opens, so a refused ``serve`` has dialled no one."""
    from node.node import Node
    from node.ports import quiet_accept_errors
    from node.serve.listeners import bind_all
    from node.serve.lock import serve_lock

    quiet_accept_errors(asyncio.get_running_loop())  # out of descriptors: one line, not one a try
    with serve_lock(args.data), ExitStack() as stack:
        ports = bind_all(stack, _ports(args, config, listen))
        async with Node.open(args.data, config=config) as node:
            return await _serve_node(args, config, node, ports, tls)


def _ports(args: argparse.Namespace, config: NodeConfig, listen: Listen) -> dict[str, Any]:
    """Where each of serve's ports listens (None: it does not)."""
    health = config.health if args.health_listen is None else args.health_listen
    return {
        "mcp_http": listen,
        "web": args.web,
        "health": None if health == "off" else health,
        "sync": args.sync_listen or config.mesh_listen,
        "join": args.join_listen,
    }


async def _serve_node(
    args: argparse.Namespace,
    config: NodeConfig,
    node: Node,
    ports: dict[str, socket.socket | None],
    tls: Tls | None,
) -> str:
    peers = args.peers if args.peers is not None else config.mesh_peers
    discover = config.discovery if args.discovery is None else args.discovery == "on"
    service: SyncService | None = None
    joins: JoinService | None = None
    if ports["sync"] is not None or peers:
        from node.mesh.service import SyncService

        service = SyncService(node, options=_sync_options(config))
    if ports["join"] is not None:
        from node.mesh.join import JoinService

        joins = JoinService(node)
    try:
        if joins is not None:
            await joins.start(ports["join"])  # type: ignore[arg-type]
        if service is not None:
            await service.start(ports["sync"], peers, _discovery(config) if discover else None)
        return await _serve_mcp(args, node, ports, tls, service, joins)
    finally:
        if joins is not None:
            await joins.close()
        if service is not None:
            await service.close()


def _discovery(config: NodeConfig) -> DiscoverySettings:
    from node.mesh.service import DiscoverySettings

    return DiscoverySettings(
        config.discovery_interfaces,
        config.discovery_max_peers,
        config.discovery_max_waiting,
        config.discovery_evict_after_ms / 1000,
    )


def _sync_options(config: NodeConfig) -> SyncOptions:
    from node.mesh.sync import SyncOptions
    from node.ports import Handshakes

    limits = config.mesh_limits
    handshakes = Handshakes(
        limits.handshake_timeout_ms / 1000, limits.max_handshakes, limits.max_handshakes_per_address
    )
    return SyncOptions(
        max_connections=limits.max_connections,
        handshakes=handshakes,
        max_connections_per_key=limits.max_connections_per_key,
        backoff_max=limits.backoff_max_ms / 1000,
        dead_peer_after=limits.dead_peer_after_ms / 1000,
    )


async def _serve_mcp(
    args: argparse.Namespace,
    node: Node,
    ports: dict[str, socket.socket | None],
    tls: Tls | None,
    service: SyncService | None,
    joins: JoinService | None,
) -> str:
    from node.mcp.http import http_server
    from node.serve.health import HealthEndpoint

    listener = ports["mcp_http"]
    assert listener is not None
    async with (
        http_server(node, listener, tls=tls) as endpoint,
        _optional_web(node, ports["web"], tls) as web_url,
        _optional_health(HealthEndpoint(node, service), ports["health"]) as health_url,
    ):
        shown = {"mcp_http": endpoint.url, "health": health_url}
        if web_url is not None:
            shown["web"] = web_url
        if service is not None:
            shown["sync"] = service.listening
        if joins is not None:
            shown["join"] = joins.listening
        try:
            return await _until_signalled(
                endpoint.stopped, ready=functools.partial(_announce, args, shown)
            )
        finally:
            if service is not None:  # links end with bye while MCP still serves
                await service.close()


@asynccontextmanager
async def _optional_web(
    node: Node, listener: socket.socket | None, tls: Tls | None
) -> AsyncIterator[str | None]:
    """The web view on ``listener`` (none without), with MCP's connection bounds, counted
    apart."""
    if listener is None:
        yield None
        return
    from node.serve.asgi import asgi_server
    from node.web.app import web_app

    app = web_app(node, secure=tls is not None)
    limits = node.config.serve_limits
    async with asgi_server(app, listener, limits, port="web", tls=tls) as endpoint:
        yield endpoint.url


@asynccontextmanager
async def _optional_health(
    endpoint: HealthEndpoint, listener: socket.socket | None
) -> AsyncIterator[str | None]:
    if listener is None:
        yield None
        return
    from node.serve.health import health_server

    async with health_server(endpoint, listener) as url:
        yield url


_SAID = {
    "mcp_http": "serving MCP at {}",
    "health": "health and metrics at {}/healthz, {}/metrics",
    "sync": "syncing at {}",
    "join": "accepting joins at {}",
    "web": "web view at {}",
}


def _stopped(args: argparse.Namespace, signal_name: str) -> None:
    """The last line of a ``serve`` that ends cleanly: every link said bye, the store closed."""
    if args.json:
        print(json.dumps({"stopped": signal_name or None}), flush=True)
    else:
        print(f"stopped{f' on {signal_name}' if signal_name else ''}", flush=True)


def _announce(args: argparse.Namespace, shown: dict[str, str | None]) -> None:
    if args.json:
        print(json.dumps(shown), flush=True)
        return
    for key, value in shown.items():
        if value is not None:
            print(_SAID[key].format(value, value), flush=True)
