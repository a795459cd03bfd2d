"""The Node façade: ``async with Node.open(path) as node`` (docs/architecture.md).

The node's lifecycle, its tokens, what serve, sync and the CLI ask of its store, and the
registry of its tools: ``node.call(name, caller, **args)`` answers any tool of
``node.tools.catalog`` through the handler the catalog names, handing it a
``node.tools.context.ToolContext``; it returns the tool's result (a JSON-ready dict) or raises
``Refusal`` with the exact text a caller is shown.  Nothing of a tool lives here: a tool is
added in node/tools alone.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from node.access import tokens
from node.access.callers import Caller
from node.config import NodeConfig
from node.errors import ConfigError, NotInitialised, Refusal
from node.identity import AUTHORITY_KEY_FILE, DB_FILE, NODE_KEY_FILE, create_key, load_key
from node.members.authority import MeshAuthority
from node.members.membership import Membership
from node.members.mesh import MeshMembers
from node.node_state import NodeInfo, join_mesh, load_info, new_mesh
from node.progress import Progress
from node.replica import Replica
from node.schema import MIGRATIONS
from node.search.opened import open_index
from node.store import Ingest, Prechecked, Reader, Received, Report, Store, StoreOptions
from node.store.partial import not_held
from node.store.pending import SourceRow
from node.tools import windows
from node.tools.args import check_unicode
from node.tools.author import Author
from node.tools.catalog import by_name, unknown_tool
from node.tools.context import Handler, ToolContext
from node.tools.looks import LOOKS, unknown_look
from node.tools.periods import declared_periods
from node.transfer.verify import VerifyReport, verify_log
from node.views import default_views
from node.windows.zones import zone_named
from protocol.entry import Entry
from protocol.frontier import Frontier
from protocol.signing import SigningKey

if TYPE_CHECKING:  # loaded where they are used: the bundle and archive code, the embedders
    from node.exchange import export as exchange
    from node.exchange import importing
    from node.search.index import VectorIndex
    from node.transfer import archive, bundles

__all__ = ["Node", "NodeInfo", "system_wall"]

Wall = Callable[[], int]


def _data_dir(path: Path | str) -> Path:
    return Path(path).expanduser()


def system_wall() -> int:
    return time.time_ns() // 1_000_000


def _options(config: NodeConfig) -> StoreOptions:
    return StoreOptions(
        synchronous=config.synchronous,
        max_clock_skew_ms=config.max_clock_skew_ms,
        pending_limit=config.pending_limit,
        pending_per_source=config.pending_per_source,
        pending_bytes=config.pending_bytes,
        pending_expiry_ms=config.pending_expiry_ms,
    )


class Node:
    """A running node over one data directory.

    Every tool of the catalog is also an attribute: ``node.e_write(caller, **args)`` is
    ``node.call("e_write", caller, **args)`` (``__getattr__``; a name the catalog does not
    hold is an ``AttributeError``)."""

    def __init__(
        self,
        path: Path,
        store: Store,
        key: SigningKey,
        info: NodeInfo,
        config: NodeConfig,
        membership: Membership,
    ) -> None:
        self.path = path
        self.store = store
        self.ingest = Ingest(store)  # the receive path into it
        self.key = key
        self.info = info
        self.config = config
        self.author = Author(store, key, info.mesh, info.epoch)
        self.vectors: VectorIndex | None = None  # the semantic leg's index, when configured
        self.declare_periods()
        authority = MeshAuthority(
            store, membership, info.mesh, path / AUTHORITY_KEY_FILE, key.public
        )
        # Who belongs, and the authority's acts.
        self.membership = MeshMembers(store, membership, authority)

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    async def init(cls, path: Path | str, *, wall: Wall = system_wall) -> NodeInfo:
        """Create a node and a new single-node mesh whose authority is this node."""
        path = _data_dir(path)
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.chmod(0o700)  # the node's secrets live here, whatever mode it had
        key = create_key(path / NODE_KEY_FILE)
        authority = create_key(path / AUTHORITY_KEY_FILE)
        (path / DB_FILE).touch(mode=0o600)  # SQLite gives its -wal and -shm files this mode
        store = await Store.open(
            path / DB_FILE,
            wall=wall,
            options=_options(NodeConfig.load(path)),
            views=default_views(),
            migrations=MIGRATIONS,
        )
        try:
            info = await new_mesh(store, key, authority)
        finally:
            await store.close()
        return info

    @classmethod
    async def init_member(
        cls, path: Path | str, *, mesh: bytes, authority: bytes, wall: Wall = system_wall
    ) -> None:
        """The store of a node joining the existing mesh ``mesh`` whose authority key is
        ``authority``, in ``path``, which holds the node's key already (docs/mesh.md
        §Joining): a fresh epoch and feed id, no authority log of its own."""
        path = _data_dir(path)
        (path / DB_FILE).touch(mode=0o600)
        store = await Store.open(
            path / DB_FILE,
            wall=wall,
            options=_options(NodeConfig.load(path)),
            views=default_views(),
            migrations=MIGRATIONS,
        )
        try:
            await join_mesh(store, mesh, authority)
        finally:
            await store.close()

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        path: Path | str,
        *,
        wall: Wall = system_wall,
        options: StoreOptions | None = None,
        config: NodeConfig | None = None,
        embed: bool = True,
    ) -> AsyncIterator[Node]:
        """The node in ``path``, configured by ``config`` (default: the data directory's
        ``config.toml``).  With an embedder configured, ``embed`` embeds what waits in the
        background (docs/search.md); without, find's vector leg uses what is embedded."""
        path = _data_dir(path)
        if not (path / DB_FILE).exists():
            raise NotInitialised(f"no node in {path} (run `memlane init --data {path}`)")
        key = load_key(path / NODE_KEY_FILE)
        config = config or NodeConfig.load(path)
        membership = Membership(own=key.public)
        options = options or _options(config)
        store = await Store.open(
            path / DB_FILE,
            wall=wall,
            options=options,
            views=(*default_views(), membership),
            migrations=MIGRATIONS,
        )
        try:
            info = await load_info(store, key)
            store.mesh = info.mesh
            store.membership = membership
            await store.erase_held()
            await store.place_held()
            node = cls(path, store, key, info, config, membership)
            async with open_index(store, config.search, embed=embed) as node.vectors:
                yield node
        finally:
            await store.close()

    # -- callers and tokens ------------------------------------------------------------------

    async def authenticate(self, token: str | None) -> Caller:
        return await tokens.authenticate(self.store, token)

    async def create_token(
        self, principal: str, workspace: str, scopes: Iterable[str], expires: int | None = None
    ) -> tokens.IssuedToken:
        """A token for ``principal`` in ``workspace``; refused for a workspace whose payloads
        this node's grant does not hold (docs/partial.md): it would read nothing here."""
        if not self.membership.may_hold(workspace):
            raise Refusal(not_held(workspace))
        return await tokens.issue(self.store, principal, workspace, scopes, expires)

    async def list_tokens(self) -> list[tokens.TokenInfo]:
        return await tokens.select_tokens(self.store)

    async def revoke_token(self, token_id: str) -> bool:
        return await tokens.revoke(self.store, token_id)

    # -- the tools ---------------------------------------------------------------------------

    async def call(self, name: str, caller: Caller, /, **args: Any) -> dict[str, Any]:
        """The tool ``name`` of the catalog, called by ``caller`` with ``args``: its
        arguments' strings are checked to be text before the tool runs (``check_unicode``),
        the one place for every tool and every way of calling it — the Python API, MCP and
        the CLI.  A tool the catalog does not hold is refused (``unknown tool: <name>``)."""
        spec = by_name(name)
        if spec is None:
            raise Refusal(unknown_tool(name))
        return await self._run(spec.handler, caller, args)

    async def look(self, name: str, caller: Caller, /, **args: Any) -> dict[str, Any]:
        """The web view's read ``name`` (``node.tools.looks``), as ``call`` runs a tool."""
        handler = LOOKS.get(name)
        if handler is None:
            raise Refusal(unknown_look(name))
        return await self._run(handler, caller, args)

    async def _run(self, handler: Handler, caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
        check_unicode(args)
        return await handler(self.context(), caller, args)

    def __getattr__(self, name: str) -> Callable[..., Awaitable[dict[str, Any]]]:
        """``node.<tool>(caller, **args)`` is ``node.call("<tool>", caller, **args)``."""
        if by_name(name) is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return functools.partial(self.call, name)

    def context(self) -> ToolContext:
        """What a tool's handler is handed of the node, as it is now (the item calls of
        ``node.tools.items`` take it too: docs/langgraph.md)."""
        return ToolContext(
            self.author,
            self.store,
            self.config.profiles,
            self.config.response_format,
            self.windows,
            self.vectors,
            self.info.feed_id,
            self._wake,
        )

    def _wake(self) -> None:
        """SRs were written or received: the vector index's worker looks at its queue now,
        not at its next poll."""
        if self.vectors is not None:
            self.vectors.wake()

    def declare_periods(self, extra: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        """Check every tool's period forms (``DeclarationError`` names a bad one) and use
        them; ``extra`` declares more (tool name → declaration, docs/time-windows.md)."""
        zone = zone_named(self.config.zone)
        if zone is None:
            raise ConfigError(f"zone {self.config.zone!r} is not an IANA time zone name")
        periods = declared_periods(self.config.retention_ms, extra)
        self.windows = windows.WindowGuard(self.author, periods, zone)

    def periods(self) -> frozenset[str]:
        """The tools that declare period forms: their calls carry the turn's context."""
        return frozenset(self.windows.periods)

    # -- the log -------------------------------------------------------------------------------

    async def receive(self, entries: Sequence[Received | Prechecked], *, source: str) -> Report:
        """Append entries from elsewhere (``Ingest.receive``)."""
        report = await self.ingest.receive(entries, source=source)
        self._wake()
        return report

    def replica(self) -> Replica:
        """The store as sync reads and writes it, for this node's mesh (``node.replica``)."""
        return Replica(self.store, self.info.mesh)

    def reader(self) -> Reader:
        """The store's reads (``Reader``): counts, positions and the audit feed's tallies."""
        assert self.store.reader is not None
        return self.store.reader

    def wall(self) -> int:
        """This node's wall clock (ms): what a duration given as an argument counts from."""
        return self.store.wall()

    async def refresh(self) -> None:
        """Take in what another process committed (an empty write transaction)."""
        await self.store.refresh()

    async def rebuild_views(self, progress: Progress | None = None) -> int:
        """Empty every view and replay the log into it, in one transaction (``memlane views
        rebuild``); how many entries were applied (``progress`` phase ``rebuild``)."""
        return await self.store.rebuild_views(progress=progress)

    async def pending(self) -> tuple[list[SourceRow], StoreOptions]:
        """What each source holds in the pending area, and the bounds it is held within."""
        return await self.ingest.select_pending(), self.store.options

    async def clear_pending(self, *, source: str | None = None, before: int | None = None) -> int:
        """Delete the waiting entries of ``source`` (all when None) that arrived before
        ``before`` (ms by the wall clock; any time when None); how many."""
        return await self.ingest.clear_pending(source=source, before=before)

    # -- bundles and the archive (docs/bundles.md, docs/operations.md §Backups) ------------------

    async def export_bundle(
        self,
        out: Path | str,
        *,
        since: Path | str | None = None,
        workspace: str | None = None,
        progress: Progress | None = None,
    ) -> bundles.ExportReport:
        """Write a bundle of this node's entries (or of what the frontier file ``since``
        lacks; with ``workspace``, only that workspace's payloads)."""
        from node.transfer import bundles

        frontier = None if since is None else Path(since)
        return await bundles.export_bundle(
            self.store,
            self.key,
            self.info.mesh,
            Path(out),
            wall=self.store.wall,
            since=frontier,
            workspace=workspace,
            progress=progress,
        )

    async def write_frontier(self, out: Path | str) -> Frontier:
        """Write this node's frontier for an exporter to cut an incremental bundle from."""
        from node.transfer import bundles

        return await bundles.write_frontier(self.store, self.key, self.info.mesh, Path(out))

    async def import_bundle(
        self, path: Path | str, *, progress: Progress | None = None
    ) -> bundles.ImportReport:
        """Verify a bundle, then apply it a chunk at a time (one ``bundle_imported`` event)."""
        from node.transfer import bundles

        return await bundles.import_bundle(
            self.store, self.info.mesh, Path(path), progress=progress
        )

    async def create_archive(
        self, out: Path | str, passphrase: bytes, *, progress: Progress | None = None
    ) -> archive.ArchiveReport:
        """Back the whole node up to ``out``, its secrets encrypted with ``passphrase``."""
        from node.transfer import archive

        return await archive.create_archive(
            self.path, Path(out), passphrase, now=self.store.wall(), progress=progress
        )

    @staticmethod
    async def restore_archive(
        path: Path | str,
        data: Path | str,
        passphrase: bytes,
        *,
        keep_tokens: bool = False,
        wall: Wall = system_wall,
        progress: Progress | None = None,
    ) -> archive.RestoreReport:
        """Restore an archive into the empty directory ``data`` (``node.transfer.archive``)."""
        from node.transfer import archive

        return await archive.restore_archive(
            Path(path),
            _data_dir(data),
            passphrase,
            now=wall(),
            keep_tokens=keep_tokens,
            progress=progress,
        )

    # -- plain files out and in (docs/export.md) -----------------------------------------------

    async def export(
        self,
        caller: Caller,
        out: Path | str,
        fmt: str,
        *,
        since: int | None = None,
        progress: Progress | None = None,
    ) -> exchange.ExportReport:
        """Write what ``caller`` may read to ``out`` as ``jsonl`` or ``markdown``; with
        ``since`` (ms), only the SRs and episodes written since."""
        from node.exchange import export as exchange

        source = exchange.Source(self.reader(), caller, self.store.now_ms(), since)
        return await exchange.export(source, Path(out), fmt, progress=progress)

    async def import_file(
        self,
        caller: Caller,
        path: Path | str,
        source: str | None = None,
        *,
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> importing.ImportReport:
        """Write the records of ``path`` (of ``source``'s kind; without it, of the kind the
        file is seen to be) as ``caller``."""
        from node.exchange import importing

        return await importing.import_file(
            self.context(), caller, Path(path), source, dry_run=dry_run, progress=progress
        )

    async def verify(self) -> VerifyReport:
        return await verify_log(self.reader())

    async def entries(self) -> list[Entry]:
        """Every stored entry, log by log in seq order (for tests and small exports)."""
        reader = self.reader()
        out: list[Entry] = []
        for log in await reader.select_logs():
            async for stored in reader.iter_entries(log.log_id):
                out.append(Entry.decode(stored.raw, stored.payload))
        return out
