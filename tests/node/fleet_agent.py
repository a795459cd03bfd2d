"""An agent of the fleet tests: a real MCP client over streamable HTTP (the SDK's) that
writes an SR every ``interval`` seconds to one node and prints each id the node acknowledged,
one line each, until it is told to stop (SIGTERM).  A call that fails — its node killed or
paused — prints ``error <kind>`` and the agent goes on with a new session.

    python -m tests.node.fleet_agent URL TOKEN NAME [INTERVAL]
"""

from __future__ import annotations

import asyncio
import signal
import sys

from tests.node.mcpkit import ask, session


async def _run(url: str, token: str, name: str, interval: float) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    n = 0
    while not stop.is_set():
        try:
            async with session(url, token) as client:
                while not stop.is_set():
                    n += 1
                    written = await ask(client, "e_write", title=f"{name} note {n}")
                    print(written["sr_id"], flush=True)
                    await asyncio.sleep(interval)
        except Exception as exc:  # every failure is reported, then retried
            print(f"error {type(exc).__name__}", flush=True)
            await asyncio.sleep(interval)


def main() -> None:
    url, token, name = sys.argv[1:4]
    interval = float(sys.argv[4]) if len(sys.argv) > 4 else 0.2
    asyncio.run(_run(url, token, name, interval))


if __name__ == "__main__":
    main()
