"""The process ``test_bundles_chunked`` kills: it opens a node and imports a bundle, a small
chunk at a time, until it is killed.

Usage: ``python tests/node/bundle_crash_child.py DATA_DIR BUNDLE CHUNK``.

It prints ``ready`` once the node is open and ``done`` if the import ends before the kill.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from node.node import Node
from node.transfer import bundles


def say(line: str) -> None:
    os.write(1, (line + "\n").encode())


async def main(data: Path, bundle: Path, chunk: int) -> None:
    async with Node.open(data) as node:
        say("ready")
        await bundles.import_bundle(node.store, node.info.mesh, bundle, chunk=chunk, pause=0.01)
        say("done")


if __name__ == "__main__":
    data_dir, bundle_arg, chunk_arg = sys.argv[1:4]
    asyncio.run(main(Path(data_dir), Path(bundle_arg), int(chunk_arg)))
