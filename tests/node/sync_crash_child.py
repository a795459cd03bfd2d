"""The receiving node ``test_sync_crash`` kills: it opens a node, writes a few entries of its
own, then dials the sending node and syncs until it is killed (or, with ``--finish``, until
both sides have caught up, when it closes the link cleanly and exits).

Usage: ``python -m tests.node.sync_crash_child DATA_DIR HOST PORT SEED OWN [--finish]``.

It prints ``ready`` once the node is open, then one line per acknowledged entry, written only
after the call or transaction that stored it has returned (so once it is durable):

- ``own <entry_id hex>`` for an ``e_write`` of its own;
- ``ep <episode id>`` for a ``work_record`` of its own;
- ``new <entry_id hex>`` for an entry a sync batch stored (the batch wrote its ``sr_synced``);
- ``held <entry_id hex>`` for an entry of a sync batch that was already held;
- ``live`` once the link has caught up both ways (the first time).

The lines of one batch go out in writes of less than ``PIPE_BUF`` bytes, each holding whole
lines, so the parent sees a line either whole or not at all; it counts only lines ending in a
newline regardless.  With ``--finish`` the last line is ``done``.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import sys
from collections.abc import Sequence
from pathlib import Path

from node.logging import configure_logging
from node.mesh.host import LinkOptions
from node.mesh.peers import PeerState
from node.mesh.sync import Sync, SyncOptions
from node.node import Node
from node.store import Received, Report
from protocol.entry import Entry

# A small window: many short batches, each its own transaction, so a kill has many points
# to land between (and inside) commits.
OPTIONS = SyncOptions(
    link=LinkOptions(credit_entries=24, hello_timeout=2.0, write_timeout=2.0, close_timeout=1.0),
    poll_interval=0.01,
    backoff_initial=0.02,
    backoff_max=0.1,
)
_CHUNK = 3000  # bytes per write: below PIPE_BUF (4096)


def say(*lines: str) -> None:
    data = b""
    for line in lines:
        encoded = (line + "\n").encode()
        if len(data) + len(encoded) > _CHUNK:
            os.write(1, data)
            data = b""
        data += encoded
    if data:
        os.write(1, data)


def entry_id(item: Received) -> bytes:
    raw = item.raw if isinstance(item, Entry) else item[0]
    return hashlib.sha256(raw).digest()


def acknowledging(sync: Sync) -> None:
    """Print every entry of a sync batch once the store's receive of it has returned (the
    link grants the batch's credit back at the same point)."""
    replica = sync.replica
    receive = replica.receive

    async def acknowledged(items: Sequence[Received], *, source: str) -> Report:
        report = await receive(items, source=source)
        new = set(report.stored_ids)
        ids = [entry_id(item) for item in items]
        say(*(f"{'new' if i in new else 'held'} {i.hex()}" for i in ids))
        return report

    replica.receive = acknowledged  # type: ignore[method-assign]


async def write_own(node: Node, seed: int, count: int) -> None:
    issued = await node.create_token("b", "team", ("read:workspace", "write:workspace"))
    caller = await node.authenticate(issued.token)
    rng = random.Random(seed)
    for n in range(count):
        if rng.random() < 0.3:
            result = await node.work_record(caller, summary=f"b {seed} step {n}", tags=["b"])
            say(f"ep {result['id']}")
        else:
            result = await node.e_write(caller, title=f"b {seed} {n}", text="b" * 200)
            say(f"own {result['entry_id']}")


async def main(data: Path, host: str, port: int, seed: int, own: int, finish: bool) -> None:
    async with Node.open(data) as node:
        say("ready")
        await write_own(node, seed, own)
        async with Sync(node.replica(), key=node.key.public, options=OPTIONS) as sync:
            acknowledging(sync)
            sync.dial(host, port)
            await sync.peers.wait_for(lambda table: any(p.state is PeerState.LIVE for p in table))
            say("live")
            if not finish:
                await asyncio.Event().wait()  # until killed
    say("done")


if __name__ == "__main__":
    configure_logging("WARNING")  # stdout is the line protocol above; logs go to stderr
    args = [a for a in sys.argv[1:] if a != "--finish"]
    data_dir, host_arg, port_arg, seed_arg, own_arg = args
    asyncio.run(
        main(
            Path(data_dir),
            host_arg,
            int(port_arg),
            int(seed_arg),
            int(own_arg),
            "--finish" in sys.argv[1:],
        )
    )
