"""The code stands alone, as the documentation does (``test_docs_links.py``): no comment,
docstring or test description under node/, protocol/ or tests/ cites a document the
repository does not hold — no ``DESIGN`` sections, no ``seeds/`` files, no ``TIME-WINDOWS``
sections.  A reference points at the pages under docs/ instead, or says what it means.

The texts the program emits are fixed (a tool's description, a schema's text): the few that
still name such a document are listed in ``FIXED_TEXTS``, each one checked to be still there,
so the list cannot outlive them.  The check is also shown broken text, so it can fail.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_OUTSIDE = re.compile(r"DESIGN §|seeds/0|TIME-WINDOWS")
# The two files that name the patterns: the checks themselves.
CHECKS = {"tests/node/test_docs_links.py", "tests/node/test_code_references.py"}


def sources() -> list[str]:
    found = [p for d in ("node", "protocol", "tests") for p in sorted((ROOT / d).rglob("*.py"))]
    names = [str(p.relative_to(ROOT)) for p in found]
    return [name for name in names if name not in CHECKS]


def problems(name: str, text: str) -> list[str]:
    """Where ``text`` (the file ``name``, relative to the repository) cites a document the
    repository does not hold."""
    return [
        f"{name}:{text.count(chr(10), 0, m.start()) + 1}: cites {m[0]!r}, "
        "which is not in this repository"
        for m in _OUTSIDE.finditer(text)
    ]


@pytest.mark.parametrize("name", sources())
def test_a_source_points_only_at_what_the_repository_holds(name: str) -> None:
    assert problems(name, (ROOT / name).read_text(encoding="utf-8")) == []


def test_every_source_is_checked() -> None:
    names = set(sources())
    assert {"node/node.py", "protocol/entry.py", "tests/node/helpers.py"} <= names
    assert not names & CHECKS


def test_the_check_finds_what_it_looks_for() -> None:
    text = "\n".join(
        [
            '"""As DESIGN §4.1 asks (seeds/000 too).',
            "",
            'TIME-WINDOWS §2 says so."""',
            "# DESIGN, seeds and TIME windows in plain words are fine.",
            'DESCRIPTION = "the rows (CallWindowRow, seeds/001)"',
        ]
    )
    name = "node/tools/catalog.py"
    assert problems(name, text) == [
        f"{name}:1: cites 'DESIGN §', which is not in this repository",
        f"{name}:1: cites 'seeds/0', which is not in this repository",
        f"{name}:3: cites 'TIME-WINDOWS', which is not in this repository",
        f"{name}:5: cites 'seeds/0', which is not in this repository",
    ]
