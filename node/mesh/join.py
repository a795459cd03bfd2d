"""Joining a mesh over the network (docs/mesh.md §Joining).

- **The authority's side**, ``JoinService``: ``memlane serve --join-listen HOST:PORT`` on the
  authority node.  TLS 1.3 where only the server shows a certificate (its ``node.crt``); each
  connection carries one ``JoinRequest`` and gets one ``JoinAnswer`` or ``JoinRefused``
  (``protocol.join``), then is closed.  The invite is redeemed with
  ``Node.membership.redeem_invite``, which records its use and authors the joiner's
  ``member.add`` in one transaction.  At most
  ``max_joins`` connections are served at once, and one that has not sent its request within
  ``read_timeout`` is dropped, so idle connections cannot hold the port; before that, a
  connection is counted from its accept and its handshake bounded (``JOIN_HANDSHAKES``:
  10 s, 16 at once, 4 from one address), so plain TCP connections cannot hold it either.
- **The joiner's side**, ``join``: ``memlane init --join INVITE --authority HOST:PORT``.  It
  makes the node in a temporary directory beside the data directory, connects, checks the
  server's certificate against the authority key inside the (signed) invite before sending
  anything, sends the request, checks the answer, stores the authority's entries through the
  receive path, writes ``ca.crt`` and ``node.crt``, and only then renames the directory into
  place.  A refused or failed join leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import ssl
import struct
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from node.address import Listen, bind_for
from node.errors import ConfigError, NodeError
from node.identity import NODE_KEY_FILE, create_key, node_id
from node.logging import get_logger
from node.members import certs, invites
from node.members.errors import InviteError, MeshError, PeerRefused
from node.mesh.service import CA_FILE, NODE_CERT_FILE, certificates
from node.node import Node, NodeInfo, Wall, system_wall
from node.ports import Handshakes, TlsGate
from node.refusals import REFUSALS
from protocol.errors import ProtocolError
from protocol.frames import PREFIX_BYTES, encode_frame
from protocol.join import (
    MAX_ANSWER_BYTES,
    MAX_REQUEST_BYTES,
    JoinAnswer,
    JoinRefused,
    JoinRequest,
    decode_answer,
    decode_request,
    encode_answer,
    encode_refused,
    encode_request,
    proof_message,
)
from protocol.signing import SigningKey, verify_signature

__all__ = ["JOIN_TIMEOUT", "MAX_JOINS", "READ_TIMEOUT", "JoinService", "join"]

_log = get_logger("node.mesh.join")

JOIN_TIMEOUT = 30.0  # seconds for a whole join, from connecting to the answer
HANDSHAKE_TIMEOUT = 10.0
JOIN_HANDSHAKES = Handshakes(timeout=HANDSHAKE_TIMEOUT, max_open=16, max_per_address=4)
MAX_JOINS = 4  # joins served at once; more connections are closed at once
# A joiner sends its request right after the handshake: a connection that has not sent it
# within this many seconds is dropped, so idle connections cannot hold the MAX_JOINS slots.
READ_TIMEOUT = 5.0
# Every slot answering a request: the newcomer is told so, and ``join`` tries again.
BUSY = "the authority's join port is busy: every join slot is taken"
RETRY_FIRST, RETRY_MAX = 0.25, 2.0  # seconds between a joiner's tries: doubling, up to this
_PREFIX = struct.Struct(">I")


class _Busy(MeshError):
    """The authority could not take the join now: worth trying again."""


class _Unanswered(Exception):
    """The other side sent no valid frame."""


async def _read_frame(reader: asyncio.StreamReader, limit: int) -> bytes:
    prefix = await reader.readexactly(PREFIX_BYTES)
    (length,) = _PREFIX.unpack(prefix)
    if not 0 < length <= limit:
        raise _Unanswered(f"a frame of {length} bytes, not 1 to {limit}")
    return await reader.readexactly(length)


async def _closed(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(OSError, ssl.SSLError):
        await writer.wait_closed()


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# -- the authority's side --------------------------------------------------------------------


class JoinService:
    """Accepts joins on the authority node: ``start`` listens, ``close`` stops."""

    def __init__(
        self,
        node: Node,
        *,
        read_timeout: float = READ_TIMEOUT,
        max_joins: int = MAX_JOINS,
        handshakes: Handshakes = JOIN_HANDSHAKES,
    ) -> None:
        self.node = node
        self.read_timeout = read_timeout
        self.max_joins = max_joins
        self.handshakes = handshakes
        self.address: tuple[str, int] | None = None
        self._server: asyncio.Server | None = None
        self._busy = 0
        self._idle: dict[asyncio.StreamWriter, None] = {}  # slots not sent a request: oldest first
        self._evicted: set[asyncio.StreamWriter] = set()
        self._ca = b""

    @property
    def listening(self) -> str | None:
        return None if self.address is None else _address(*self.address)

    async def start(self, listen: Listen | socket.socket) -> None:
        """Accept joins on ``listen``: an address, or a socket bound and listening."""
        self.node.membership.require_authority()  # NotAuthority on any other node
        ca, certificate = certificates(self.node)
        self._ca = certs.pem(ca)
        key = certs.private_key(self.node.path / NODE_KEY_FILE)
        context = certs.join_server_context(certificate, key)
        gate = TlsGate(context, self.handshakes, self._handle, port="join")
        sock = listen if isinstance(listen, socket.socket) else bind_for(listen, "joins")
        self._server = await asyncio.start_server(gate, sock=sock)
        host, port = self._server.sockets[0].getsockname()[:2]
        self.address = (str(host), int(port))

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        taken_over = self._busy >= self.max_joins
        if taken_over and not self._evict_idle():
            REFUSALS.count("join_slots")
            with contextlib.suppress(OSError):
                writer.write(encode_frame(encode_refused(JoinRefused(BUSY))))
            await _closed(writer)
            return
        if not taken_over:
            self._busy += 1
        self._idle[writer] = None
        try:
            async with asyncio.timeout(JOIN_TIMEOUT):
                async with asyncio.timeout(self.read_timeout):
                    body = await _read_frame(reader, MAX_REQUEST_BYTES)
                del self._idle[writer]
                answer = await self.answer(body)
                writer.write(encode_frame(answer))
                await writer.drain()
        except (_Unanswered, asyncio.IncompleteReadError, TimeoutError, OSError) as exc:
            _log.info("a join connection ended without a request", error=str(exc))
            if isinstance(exc, TimeoutError):
                REFUSALS.count("join_idle")
        finally:
            self._idle.pop(writer, None)
            if writer in self._evicted:
                self._evicted.discard(writer)  # its slot went to the connection that evicted it
            else:
                self._busy -= 1
            await _closed(writer)

    def _evict_idle(self) -> bool:
        """Close the oldest connection that has not sent its request yet, its slot handed
        to a newcomer (as OpenSSH's MaxStartups drops early connections); False if every
        slot is answering a request."""
        if not self._idle:
            return False
        oldest = next(iter(self._idle))
        del self._idle[oldest]
        self._evicted.add(oldest)
        REFUSALS.count("join_evicted")
        oldest.transport.abort()
        return True

    async def answer(self, body: bytes) -> bytes:
        """The answer to one request body: the join's material, or why it was refused."""
        node = self.node
        try:
            request = decode_request(body)
            invite = invites.read(request.invite)
            signed = proof_message(invite.invite_id, request.key)
            if not verify_signature(request.key, request.proof, signed):
                raise InviteError("the joiner's proof of its key does not verify")
            redeemed = await node.membership.redeem_invite(request.invite, request.key)
        except (NodeError, ProtocolError) as exc:  # MeshError: the invite, the joiner's key
            _log.warning("a join was refused", reason=str(exc))
            return encode_refused(JoinRefused(str(exc)))
        entries = await node.membership.authority_entries()
        answer = JoinAnswer(
            node.info.mesh,
            node.membership.authority_key or b"",
            tuple(entries),
            self._ca,
            certs.pem(redeemed.certificate),
        )
        _log.info("a node joined", node=node_id(request.key))
        try:
            return encode_answer(answer)
        except ProtocolError as exc:
            return encode_refused(JoinRefused(f"the authority cannot send its log: {exc}"))


# -- the joiner's side -------------------------------------------------------------------------


async def join(
    path: Path,
    text: str,
    host: str,
    port: int,
    *,
    wall: Wall = system_wall,
    seconds: float = JOIN_TIMEOUT,
) -> NodeInfo:
    """Create a node in ``path`` (absent or empty) that joins the mesh of ``text`` (an invite)
    through its authority at ``host``:``port``.  ``MeshError`` (``InviteError`` for the
    authority's refusals) or ``ConfigError``; nothing is left behind then."""
    invite = invites.read(text)
    work = _workspace(path)
    try:
        key = create_key(work / NODE_KEY_FILE)
        answer = await _answered(
            lambda left: _exchange(invite, text.strip(), key, host, port, wall, left), seconds
        )
        info = await _make(work, key, answer, wall)
        _place(work, path)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return info


def _workspace(path: Path) -> Path:
    """A private directory beside ``path`` (which must be absent or empty) to build in."""
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise ConfigError(f"{path} is not empty: a node joins into a new data directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{path.name}.joining-", dir=path.parent))


def _place(work: Path, path: Path) -> None:
    if path.exists():
        path.rmdir()  # empty, as checked before
    work.rename(path)


async def _answered(
    exchange: Callable[[float], Awaitable[JoinAnswer]], seconds: float
) -> JoinAnswer:
    """``exchange`` (given the seconds left), tried again while the authority is busy (or
    closed the connection unanswered: its slot given to a newer connection), until
    ``seconds`` have passed."""
    loop = asyncio.get_running_loop()
    deadline, delay, tries = loop.time() + seconds, RETRY_FIRST, 1
    while True:
        try:
            return await exchange(deadline - loop.time())
        except _Busy as exc:
            if loop.time() + delay >= deadline:
                raise MeshError(f"{exc} ({tries} tries in {seconds:g} s)") from exc
        await asyncio.sleep(delay)
        delay, tries = min(delay * 2, RETRY_MAX), tries + 1


async def _exchange(
    invite: invites.Invite,
    text: str,
    key: SigningKey,
    host: str,
    port: int,
    wall: Wall,
    seconds: float,
) -> JoinAnswer:
    where = _address(host, port)
    try:
        async with asyncio.timeout(seconds):
            reader, writer = await asyncio.open_connection(
                host, port, ssl=certs.join_client_context(), ssl_handshake_timeout=seconds
            )
            try:
                ssl_object = writer.get_extra_info("ssl_object")
                der = None if ssl_object is None else ssl_object.getpeercert(binary_form=True)
                try:
                    certs.issued_by(der, invite.authority, invite.mesh, wall())
                except PeerRefused as exc:
                    raise MeshError(
                        f"{where} is not the authority of this invite's mesh: {exc}"
                    ) from exc
                proof = key.sign(proof_message(invite.invite_id, key.public))
                writer.write(encode_frame(encode_request(JoinRequest(text, key.public, proof))))
                await writer.drain()
                body = await _read_frame(reader, MAX_ANSWER_BYTES)
            finally:
                writer.close()
                with contextlib.suppress(OSError, ssl.SSLError):
                    await writer.wait_closed()
    except TimeoutError as exc:
        raise MeshError(f"the authority at {where} did not answer within {seconds:g} s") from exc
    except ssl.SSLError as exc:
        raise MeshError(f"TLS with the authority at {where} failed: {exc.reason}") from exc
    except (_Unanswered, asyncio.IncompleteReadError) as exc:
        raise _Busy(f"the authority at {where} closed the connection unanswered") from exc
    except OSError as exc:
        raise MeshError(f"cannot reach the authority at {where}: {exc.strerror or exc}") from exc
    try:
        answer = decode_answer(body)
    except ProtocolError as exc:
        raise MeshError(f"the authority at {where} sent a malformed answer: {exc}") from exc
    if isinstance(answer, JoinRefused) and answer.reason == BUSY:
        raise _Busy(f"the authority at {where} is busy: every join slot is taken")
    if isinstance(answer, JoinRefused):
        raise InviteError(f"the authority refused the join: {answer.reason}")
    _check(answer, invite, key.public, wall(), where)
    return answer


def _check(answer: JoinAnswer, invite: invites.Invite, key: bytes, now: int, where: str) -> None:
    """The answer is for the invite's mesh and authority, and its certificates are the
    authority's own and this node's, both issued by the invite's authority key."""
    if answer.mesh != invite.mesh or answer.authority != invite.authority:
        raise MeshError(f"the authority at {where} answered for another mesh")
    try:
        ca = certs.load_pem(answer.ca)
        mine = certs.load_pem(answer.certificate)
        ca_key = certs.issued_by(certs.der(ca), invite.authority, invite.mesh, now)
        cert_key = certs.issued_by(certs.der(mine), invite.authority, invite.mesh, now)
    except MeshError as exc:
        raise MeshError(f"the authority at {where} sent a bad certificate: {exc}") from exc
    if ca_key != invite.authority or cert_key != key:
        raise MeshError(f"the authority at {where} sent certificates for other keys")


async def _make(work: Path, key: SigningKey, answer: JoinAnswer, wall: Wall) -> NodeInfo:
    """The node's store and certificate files, in ``work`` (which holds its key)."""
    await Node.init_member(work, mesh=answer.mesh, authority=answer.authority, wall=wall)
    async with Node.open(work, wall=wall) as node:
        await node.receive(answer.entries, source="join")
        if not node.membership.admits(key.public, wall()):
            raise MeshError("the authority's log it sent does not admit this node")
        info = node.info
    for name, data in ((CA_FILE, answer.ca), (NODE_CERT_FILE, answer.certificate)):
        fd = os.open(work / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    return info
