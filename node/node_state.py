"""What a node's store says of the node (docs/architecture.md): its ``NodeInfo``, and the
``state`` rows written when a node makes a new mesh or joins one."""

from __future__ import annotations

from dataclasses import dataclass

from node.errors import NotInitialised
from node.identity import node_id, random_bytes
from node.store import Store, Txn
from protocol.kinds import encode_payload
from protocol.signing import SigningKey

__all__ = ["NO_EXPIRY_MS", "NodeInfo", "join_mesh", "load_info", "new_mesh"]

# The cert_expires of the authority's own node, which never expires (docs/mesh.md
# §Certificates): 9999-12-31T23:59:59.999Z, the last instant a time can spell.
NO_EXPIRY_MS = 253_402_300_799_999


@dataclass(frozen=True, slots=True)
class NodeInfo:
    node_id: str
    public_key: bytes
    mesh: bytes
    epoch: bytes
    feed_id: str


async def _put(store: Store, rows: tuple[tuple[str, bytes], ...]) -> None:
    async def op(txn: Txn) -> None:
        for name, value in rows:
            store.put_state(txn, name, value)

    await store.run(op)


async def new_mesh(store: Store, key: SigningKey, authority: SigningKey) -> NodeInfo:
    """A new single-node mesh whose authority key is ``authority``: its state, and the
    authority's ``member.add`` of this node's ``key``."""
    mesh, epoch, authority_epoch = random_bytes(16), random_bytes(8), random_bytes(8)
    feed_id = random_bytes(8).hex()
    await _put(
        store,
        (
            ("mesh", mesh),
            ("epoch", epoch),
            ("authority", authority.public),
            ("authority_epoch", authority_epoch),
            ("feed_id", feed_id.encode()),
        ),
    )
    payload = {"node": key.public, "workspaces": ["*"], "cert_expires": NO_EXPIRY_MS}
    data = encode_payload("member.add", payload)

    await store.author(authority, mesh, authority_epoch, "member.add", (data, payload))
    return NodeInfo(node_id(key.public), key.public, mesh, epoch, feed_id)


async def join_mesh(store: Store, mesh: bytes, authority: bytes) -> None:
    """The state of a node joining the mesh ``mesh`` whose authority key is ``authority``:
    a fresh epoch and feed id, no authority log of its own."""
    epoch, feed_id = random_bytes(8), random_bytes(8).hex()
    await _put(
        store,
        (
            ("mesh", mesh),
            ("epoch", epoch),
            ("authority", authority),
            ("feed_id", feed_id.encode()),
        ),
    )


async def load_info(store: Store, key: SigningKey) -> NodeInfo:
    """The node's ``NodeInfo`` from its store; ``NotInitialised`` if never written."""
    values = {k: await store.get_state(k) for k in ("mesh", "epoch", "feed_id")}
    mesh, epoch, feed = values["mesh"], values["epoch"], values["feed_id"]
    if mesh is None or epoch is None or feed is None:
        raise NotInitialised(f"the store at {store.path} was never initialised")
    return NodeInfo(node_id(key.public), key.public, mesh, epoch, feed.decode())
