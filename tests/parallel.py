"""How pytest-xdist spreads the suite over its workers (``make test`` runs ``pytest -n N``).

Each test goes to whichever worker is free, as with xdist's ``--dist load``, except the groups
below: the tests of a group run in one worker, one after another, in the order they were
collected.  A group is named here by the start of its tests' ids, for one of two reasons:

- **its last tests look at what the earlier ones left in the process**: the simulator's
  checks that the seeds met every fault;
- **a module-scoped fixture is costly**: a served node or a mesh the module's tests share,
  started once rather than once a worker (and the session's one Chromium).

What all workers share needs no group: every port is 0 on loopback, every directory a test's
own.  Served nodes that advertise and browse by zeroconf on 127.0.0.1 (test_serve_discovery,
test_demo, test_deploy's local mesh with discovery on, the sync_start and hostile smoke runs)
see each other's services, but each test's nodes are of a mesh of their own, and a node acts
only on sightings of its own mesh (node/mesh/discovery.py): a sighting, a dial, a place among
the candidates, an eviction are all of its mesh.

(xdist's own ``xdist_group`` mark would say the same on the tests; with pytest 9 it has no
effect, xdist 3.8 setting a node id attribute pytest no longer reads.)
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

__all__ = ["GROUPS", "Grouped"]

GROUPS = {  # the start of a test id: its group
    "tests/sim/test_sim.py::": "sim",
    "tests/node/test_mcp_http.py::": "mcp_http",
    "tests/node/test_client_recipes.py::": "client_recipes",
    "tests/node/test_noninterference.py::": "noninterference",
    "tests/browser/": "browser",
}


class Grouped(LoadScopeScheduling):
    """xdist's scheduler by scope, where a test's scope is its group, or else the test alone.
    (Scopes are handed out the most tests first, so the groups start early.)"""

    def _split_scope(self, nodeid: str) -> str:
        for start, group in GROUPS.items():
            if nodeid.startswith(start):
                return group
        return nodeid
