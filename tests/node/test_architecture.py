"""The house's rules that imports and SQL can show (docs/architecture.md §Table owners).

- Every table of the store file has one owning package, and only that package names the table
  in SQL — an owner hands another the statements it needs of its tables
  (``HiddenEntries.positions``, ``entries_at``, ``shown_at``, ``Semantic.queued``).
  ``FROZEN`` lists the statements of migration steps, which cannot change, that name another's
  table; an entry that no longer holds fails the test too.
- No module of ``node`` or ``protocol`` imports a private name (``_x``) from another module,
  of its own package or another: a name another module uses is part of its module's
  interface, and is named so.
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
            "erased_srs",
            "erased",
            "missing",
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
            "sr_terms",
            "sr_scopes",
            "sr_lanes",
            "sr_segments",
            "sr_postings",
            "sr_index_docs",
            "sr_index_queue",
            "sr_index_erased",
            "episodes",
            "episode_entries",
            "episode_index",
            "episode_due",
            "episodes_clustered",
            "forgotten",
            "call_windows",
            "store_items",
        }
    ),
    # The semantic leg's index (node/search/index.py).
    "node/search": frozenset({"sr_vectors", "sr_vector_model", "sr_embed_queue"}),
}
OWNER = {table: owner for owner, tables in OWNERS.items() for table in tables}

# Statements of frozen migration steps that name another owner's table.  A step is history:
# its text stays as it was written (tests/node/test_schema_golden.py), so its statements cannot
# move.  The vector index's triggers (step 9) queue a doc when the SR view's ``srs`` shows new
# text at it.
FROZEN: frozenset[tuple[str, str]] = frozenset({("node/search/schema.py", "srs")})

_SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER)\b")
_NAMED = re.compile(
    r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE(?:\s+IF\s+(?:NOT\s+)?EXISTS)?|ON)\s+([a-z_][a-z0-9_]*)",
    re.IGNORECASE,
)


def _modules(*tops: str) -> Iterator[tuple[str, ast.Module]]:
    for top in tops:
        for path in sorted((ROOT / top).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text("utf-8"))


def _strings(tree: ast.Module) -> Iterator[str]:
    """A module's string constants, an f-string as one (each replacement field as ``{}``)."""
    parts: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts.update(id(value) for value in node.values)
            yield "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts:
            yield node.value


def _sql_tables(tree: ast.Module) -> Iterator[str]:
    """The tables a module's strings name in SQL."""
    for text in _strings(tree):
        if _SQL.search(text):
            yield from (m.group(1).lower() for m in _NAMED.finditer(text))


def _owns(owner: str, module: str) -> bool:
    return module == owner or module.startswith(owner + "/")


def test_every_table_is_named_in_sql_only_by_its_owner():
    found = {
        (module, table)
        for module, tree in _modules("node")
        for table in _sql_tables(tree)
        if table in OWNER and not _owns(OWNER[table], module)
    }
    assert found - FROZEN == set(), "a table named outside its owner"
    assert FROZEN - found == set(), "no longer named: take it off FROZEN"


def test_every_table_the_store_file_holds_has_an_owner():
    created = set()
    for _, tree in _modules("node"):
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                created |= set(re.findall(r"CREATE (?:VIRTUAL )?TABLE ([a-z_]+)", node.value))
    assert created, "the schema's DDL was not found"
    assert created - set(OWNER) == set()


def test_no_private_name_is_imported_from_another_module():
    crossing = []
    for path, tree in _modules("node", "protocol"):
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = "." * node.level + (node.module or "")
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    crossing.append(f"{path}: from {source} import {alias.name}")
    assert crossing == []


def _rooms_named(markdown: str) -> set[str]:
    """The names in the first column of docs/architecture.md's table of ``node/``'s rooms."""
    section = markdown.split("## `node/` — the node", 1)[1].split("\n## ", 1)[0]
    firsts = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return {name for cell in firsts for name in re.findall(r"`([^`]+)`", cell)}


def test_every_room_of_the_node_is_in_the_architecture_table():
    """Each package and module of ``node/`` has its row (a package's docstring says the rest)."""
    named = _rooms_named((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    node = ROOT / "node"
    rooms = {f"{p.name}/" for p in node.iterdir() if (p / "__init__.py").exists()}
    rooms |= {p.name for p in node.glob("*.py") if p.name != "__init__.py"}
    assert rooms - named == set()
    assert named - rooms == set()  # and no row names a room that is gone
    assert _rooms_named("## `node/` — the node\n\n| `a.py`, `b/` | x |\n") == {"a.py", "b/"}
