"""protocol/ is sans-IO: no module in it imports IO, clocks, randomness, logging or node."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PROTOCOL = Path(__file__).resolve().parents[2] / "protocol"
FORBIDDEN = frozenset(
    {
        "asyncio",
        "aiosqlite",
        "sqlite3",
        "socket",
        "ssl",
        "time",
        "random",
        "secrets",
        "logging",
        "structlog",
        "os",
        "node",
    }
)
MODULES = sorted(PROTOCOL.rglob("*.py"))


def forbidden_imports(source: str) -> set[str]:
    """Top-level names of forbidden modules that ``source`` imports (absolute imports only)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found |= {name.split(".")[0] for name in names} & FORBIDDEN
    return found


def test_the_walker_sees_every_form_of_import() -> None:
    source = (
        "import os.path\nimport json, time as t\nfrom asyncio import sleep\n"
        "from node.store import x\nif True:\n    import random\n"
        "def f():\n    import secrets\nfrom . import time\nfrom protocol import entry\n"
    )
    assert forbidden_imports(source) == {"os", "time", "asyncio", "node", "random", "secrets"}


def test_the_protocol_package_is_where_the_walk_looks() -> None:
    names = {p.name for p in MODULES}
    assert names >= {
        "entry.py",
        "canonical.py",
        "signing.py",
        "kinds.py",
        "clock.py",
        "timefmt.py",
        "schema.py",
        "errors.py",
    }


@pytest.mark.parametrize("path", MODULES, ids=[p.name for p in MODULES])
def test_protocol_module_imports_nothing_forbidden(path: Path) -> None:
    assert forbidden_imports(path.read_text("utf-8")) == set(), path.name
