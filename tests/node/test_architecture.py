"""The house's rules that imports and SQL can show (docs/architecture.md §Table owners).

- Every table of the store file has one owning package, and only that package names the table
  in SQL. ``NOT_YET_MOVED`` lists the places that still name another's table; it may only
  shrink — a new one fails the test, and so does an entry that no longer holds.
- No module of ``node`` or ``protocol`` imports a private name (``_x``) from another package.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

OWNERS: dict[str, frozenset[str]] = {
    # The log: what was written and received, and the node's own state.
    "node/store": frozenset(
        {
            "schema_version",
            "state",
            "logs",
            "headers",
            "payloads",
            "pending",
            "forks",
            "forks_key_first",
            "audit",
            "bundle_subjects",
        }
    ),
    "node/access/tokens.py": frozenset({"tokens"}),
    # The views: derived from the log, rebuilt by replaying it.
    "node/views": frozenset(
        {
            "deletions",
            "sr_index",
            "srs",
            "sr_versions",
            "sr_docs",
            "sr_tags",
            "sr_links",
            "sr_stats",
            "sr_due",
            "sr_fts",
            "sr_vocab",
            "episodes",
            "episode_entries",
            "episode_index",
            "episode_due",
            "episodes_clustered",
            "forgotten",
            "call_windows",
        }
    ),
    # The semantic leg's index (node/search/index.py).
    "node/search": frozenset({"sr_vectors", "sr_vector_model", "sr_embed_queue"}),
}
OWNER = {table: owner for owner, tables in OWNERS.items() for table in tables}

NOT_YET_MOVED: frozenset[tuple[str, str]] = frozenset(
    {
        # An archive's token rows: taken out of the copy, and put back by a restore.
        ("node/transfer/archive/create.py", "tokens"),
        ("node/transfer/archive/restore.py", "tokens"),
        # The views' reads of the log's positions (hiding a forked log, replaying the log).
        ("node/views/call_windows.py", "headers"),
        ("node/views/episodes.py", "headers"),
        ("node/views/srs.py", "headers"),
        ("node/views/srs.py", "logs"),
        ("node/views/srs.py", "payloads"),
        # The embed queue joined with the SR view's rows, and kept by triggers on them.
        ("node/search/schema.py", "srs"),
        ("node/views/sr_queries.py", "sr_embed_queue"),
        ("node/views/find.py", "sr_embed_queue"),
    }
)

_SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER)\b")
_NAMED = re.compile(
    r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE(?:\s+IF\s+(?:NOT\s+)?EXISTS)?|ON)\s+([a-z_][a-z0-9_]*)",
    re.IGNORECASE,
)


def _modules(*tops: str) -> Iterator[tuple[str, ast.Module]]:
    for top in tops:
        for path in sorted((ROOT / top).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text("utf-8"))


def _sql_tables(tree: ast.Module) -> Iterator[str]:
    """The tables a module's string constants name in SQL."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _SQL.search(node.value)
        ):
            yield from (m.group(1).lower() for m in _NAMED.finditer(node.value))


def _owns(owner: str, module: str) -> bool:
    return module == owner or module.startswith(owner + "/")


def test_every_table_is_named_in_sql_only_by_its_owner():
    found = {(module, table) for module, tree in _modules("node")
             for table in _sql_tables(tree)
             if table in OWNER and not _owns(OWNER[table], module)}  # fmt: skip
    assert found - NOT_YET_MOVED == set(), "a table named outside its owner"
    assert NOT_YET_MOVED - found == set(), "moved: take it off NOT_YET_MOVED"


def test_every_table_the_store_file_holds_has_an_owner():
    created = set()
    for _, tree in _modules("node"):
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                created |= set(re.findall(r"CREATE (?:VIRTUAL )?TABLE ([a-z_]+)", node.value))
    assert created, "the schema's DDL was not found"
    assert created - set(OWNER) == set()


def _package(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 else parts[0]


def test_no_private_name_is_imported_across_packages():
    crossing = []
    for path, tree in _modules("node", "protocol"):
        here = _package(".".join(Path(path).with_suffix("").parts))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or not node.module or node.level:
                continue
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and _package(node.module) != here:
                    crossing.append(f"{path}: from {node.module} import {alias.name}")
    assert crossing == []
