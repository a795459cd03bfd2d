"""The process ``test_crash`` kills: it opens a node and appends from several authors until
it is killed.

Usage: ``python tests/node/crash_child.py DATA_DIR TOKEN SEED [AUTHORS]``.

It prints ``ready`` once the node is open, then one line per acknowledged write, written only
after the write's call returned (so once the entry is durable):

- ``sr <entry_id hex> <sr_id>`` for an e_write (a new SR or an update of one made earlier);
- ``ep <episode id>`` for a work_record.

Each line goes out in a single ``write`` of less than ``PIPE_BUF`` bytes, so the parent sees a
line either whole or not at all; it counts only lines ending in a newline regardless.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
from pathlib import Path

from node.access.callers import Caller
from node.node import Node


def say(line: str) -> None:
    os.write(1, (line + "\n").encode())


async def author(node: Node, caller: Caller, rng: random.Random, name: str) -> None:
    created: list[str] = []
    n = 0
    while True:
        n += 1
        roll = rng.random()
        if roll < 0.2:
            result = await node.work_record(caller, summary=f"{name} step {n}", tags=[name])
            say(f"ep {result['id']}")
            continue
        if roll < 0.35 and created:
            sr_id = rng.choice(created)
            result = await node.e_write(caller, sr_id=sr_id, text=f"{name} edit {n}")
        else:
            # Texts of up to a few pages, so the WAL grows and checkpoints happen between kills.
            text = rng.choice("abcdefgh") * rng.randrange(0, 6000)
            result = await node.e_write(caller, title=f"{name} {n}", text=text)
            created.append(result["sr_id"])
        say(f"sr {result['entry_id']} {result['sr_id']}")


async def main(data: Path, token: str, seed: int, authors: int) -> None:
    async with Node.open(data) as node:
        caller = await node.authenticate(token)
        say("ready")
        await asyncio.gather(
            *(author(node, caller, random.Random(seed * 1000 + i), f"a{i}") for i in range(authors))
        )


if __name__ == "__main__":
    data_dir, token_arg, seed_arg = sys.argv[1:4]
    count = int(sys.argv[4]) if len(sys.argv) > 4 else 8
    asyncio.run(main(Path(data_dir), token_arg, int(seed_arg), count))
