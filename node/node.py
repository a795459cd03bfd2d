"""The Node façade: ``async with Node.open(path) as node`` (docs/architecture.md).

One typed method per tool, named as the tool; each takes the authenticated ``Caller`` and the
tool's arguments and returns the tool's result (a JSON-ready dict) or raises ``Refusal`` with
the exact text a caller is shown.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from node.access import tokens
from node.access.callers import Caller
from node.authoring import Author
from node.config import NodeConfig
from node.errors import ConfigError, NotInitialised
from node.identity import AUTHORITY_KEY_FILE, DB_FILE, NODE_KEY_FILE, create_key, load_key
from node.members.authority import MeshAuthority
from node.members.membership import Membership
from node.members.mesh import MeshMembers
from node.node_state import NodeInfo, join_mesh, load_info, new_mesh
from node.progress import Progress
from node.replica import Replica
from node.schema import MIGRATIONS
from node.search.opened import open_index
from node.store import Reader, Received, Report, Store, StoreOptions
from node.store.pending import SourceRow
from node.tools import audit, episode_reads, episodes, srs, timeline, windows
from node.tools.args import check_unicode
from node.tools.periods import declared_periods
from node.transfer.verify import VerifyReport, verify_log
from node.views import default_views
from node.windows.zones import zone_named
from protocol.entry import Entry
from protocol.frontier import Frontier
from protocol.signing import SigningKey

if TYPE_CHECKING:  # loaded where they are used: the bundle and archive code, the embedders
    from node.search.index import VectorIndex
    from node.transfer import archive, bundles

__all__ = ["Node", "NodeInfo", "system_wall"]

Wall = Callable[[], int]
T = TypeVar("T")


ToolMethod = TypeVar("ToolMethod", bound=Callable[..., Awaitable[dict[str, Any]]])


def _tool(method: ToolMethod) -> ToolMethod:
    """A tool of the node: its arguments' strings are checked to be text before the tool runs
    (``check_unicode``), the one place for every tool and every way of calling it — the
    Python API, MCP and the CLI."""

    @functools.wraps(method)
    async def checked(self: Node, caller: Caller, /, **args: Any) -> dict[str, Any]:
        check_unicode(args)
        return await method(self, caller, **args)

    return cast(ToolMethod, checked)


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
    """A running node over one data directory."""

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
        self.key = key
        self.info = info
        self.config = config
        self.author = Author(store, key, info.mesh, info.epoch)
        self.vectors: VectorIndex | None = None  # the semantic leg's index, when configured
        self.declare_periods()
        authority = MeshAuthority(store, membership, info.mesh, path / AUTHORITY_KEY_FILE,
                                  key.public)  # fmt: skip
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
        store = await Store.open(path / DB_FILE, wall=wall, options=_options(NodeConfig.load(path)),
                                 views=default_views(), migrations=MIGRATIONS)  # fmt: skip
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
        store = await Store.open(path / DB_FILE, wall=wall, options=_options(NodeConfig.load(path)),
                                 views=default_views(), migrations=MIGRATIONS)  # fmt: skip
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
        membership = Membership()
        store = await Store.open(path / DB_FILE, wall=wall, options=options or _options(config),
                                 views=(*default_views(), membership),
                                 migrations=MIGRATIONS)  # fmt: skip
        try:
            info = await load_info(store, key)
            store.mesh = info.mesh
            store.membership = membership
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
        return await tokens.issue(self.store, principal, workspace, scopes, expires)

    async def list_tokens(self) -> list[tokens.TokenInfo]:
        return await tokens.select_tokens(self.store)

    async def revoke_token(self, token_id: str) -> bool:
        return await tokens.revoke(self.store, token_id)

    # -- write tools ---------------------------------------------------------------------------

    @_tool
    async def e_write(self, caller: Caller, /, **args: Any) -> dict[str, Any]:
        return self._written(await srs.e_write(self.author, caller, args))

    @_tool
    async def e_correct(self, caller: Caller, /, **args: Any) -> dict[str, Any]:
        return self._written(await srs.e_correct(self.author, caller, args))

    @_tool
    async def e_adjust(self, caller: Caller, /, **args: Any) -> dict[str, Any]:
        return self._written(await srs.e_adjust(self.author, caller, args))

    def _written(self, answer: T) -> T:
        """SRs were written or received: the vector index's worker looks at its queue now,
        not at its next poll."""
        if self.vectors is not None:
            self.vectors.wake()
        return answer

    @_tool
    async def e_delete(self, caller: Caller, /, **args: Any) -> dict[str, Any]:
        return await srs.e_delete(self.author, caller, args)

    @_tool
    async def e_undelete(self, caller: Caller, /, **args: Any) -> dict[str, Any]:
        return await srs.e_undelete(self.author, caller, args)

    @_tool
    async def work_record(self, caller: Caller, /, **args: Any) -> dict[str, Any]:
        return await episodes.work_record(self.author, caller, args)

    @_tool
    async def work_result(self, caller: Caller, /, **args: Any) -> dict[str, Any]:
        return await episodes.work_result(self.author, caller, args)

    @_tool
    async def work_forget(self, caller: Caller, /, **args: Any) -> dict[str, Any]:
        return await episodes.work_forget(self.author, caller, args)

    # -- read tools ----------------------------------------------------------------------------

    @_tool
    async def e_timeline(
        self, caller: Caller, /, *, turn: Any = None, **args: Any
    ) -> dict[str, Any]:
        """``turn``: the turn's context (docs/time-windows.md); with it the call's window is
        filed, and the call may be filled or refused before dispatch."""
        zone, profiles = self.windows.zone, self.config.profiles

        async def run(sent: Mapping[str, Any], now: int | None) -> dict[str, Any]:
            return await timeline.e_timeline(self.store, caller, sent, profiles, zone,
                                             self.vectors, now)  # fmt: skip

        async def check(sent: Mapping[str, Any], now: int) -> object:
            return await timeline.checked_spec(self.store, caller, sent, profiles, zone, now)

        return await self.windows.call(caller, "e_timeline", args, turn, run=run, check=check,
                                       trim_field=timeline.window_field)  # fmt: skip

    @_tool
    async def call_windows(self, caller: Caller, /, **args: Any) -> dict[str, Any]:
        return await windows.call_windows(self.reader(), caller, args, self.store.now_ms())

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

    @_tool
    async def work_episode_chain(self, caller: Caller, /, **args: Any) -> dict[str, Any]:
        return await episode_reads.work_episode_chain(
            self.store, caller, args, self.config.response_format
        )

    @_tool
    async def work_episodes(self, caller: Caller, /, **args: Any) -> dict[str, Any]:
        return await episode_reads.work_episodes(
            self.store, caller, args, self.config.response_format
        )

    @_tool
    async def e_audit(self, caller: Caller, /, **args: Any) -> dict[str, Any]:
        return await audit.e_audit(self.reader(), self.info.feed_id, caller, args)

    # -- the log -------------------------------------------------------------------------------

    async def receive(self, entries: Sequence[Received], *, source: str) -> Report:
        """Append entries from elsewhere (see ``Store.receive``)."""
        return self._written(await self.store.receive(entries, source=source))

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
        return await self.store.select_pending(), self.store.options

    async def clear_pending(self, *, source: str | None = None, before: int | None = None) -> int:
        """Delete the waiting entries of ``source`` (all when None) that arrived before
        ``before`` (ms by the wall clock; any time when None); how many."""
        return await self.store.clear_pending(source=source, before=before)

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
        return await bundles.export_bundle(self.store, self.key, self.info.mesh, Path(out),
                                           wall=self.store.wall, since=frontier,
                                           workspace=workspace, progress=progress)  # fmt: skip

    async def write_frontier(self, out: Path | str) -> Frontier:
        """Write this node's frontier for an exporter to cut an incremental bundle from."""
        from node.transfer import bundles

        return await bundles.write_frontier(self.store, self.key, self.info.mesh, Path(out))

    async def import_bundle(
        self, path: Path | str, *, progress: Progress | None = None
    ) -> bundles.ImportReport:
        """Verify a bundle, then apply it a chunk at a time (one ``bundle_imported`` event)."""
        from node.transfer import bundles

        return await bundles.import_bundle(self.store, self.info.mesh, Path(path),
                                           progress=progress)  # fmt: skip

    async def create_archive(
        self, out: Path | str, passphrase: bytes, *, progress: Progress | None = None
    ) -> archive.ArchiveReport:
        """Back the whole node up to ``out``, its secrets encrypted with ``passphrase``."""
        from node.transfer import archive

        return await archive.create_archive(self.path, Path(out), passphrase,
                                            now=self.store.wall(), progress=progress)  # fmt: skip

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

        return await archive.restore_archive(Path(path), _data_dir(data), passphrase,
                                             now=wall(), keep_tokens=keep_tokens,
                                             progress=progress)  # fmt: skip

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
