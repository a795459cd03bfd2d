"""The documentation stands alone: README.md and every page under docs/ say what they mean
themselves, and what they point at is in this repository.

- No page cites a document the repository does not hold: no ``DESIGN`` sections, no
  ``seeds/`` files, no ``TIME-WINDOWS`` sections (the tool texts such references leaned on
  are quoted in the pages themselves).
- Every relative link (``[text](path#anchor)``) names a file or directory that exists, and an
  anchor names a heading of the page it points at (GitHub's slugs).
- Every repository path a page names in passing (``node/views/fold.py``,
  ``deploy/compose.yaml``, ``docs/mesh.md``) exists.
- No table is broken by a blank line between its rows: Markdown ends a table at a blank line,
  and the rows after it render as plain text with their pipes.

The check is also shown broken text, so it can fail.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Files a page tells its reader to make (the compose file's invites).
MADE_BY_THE_READER = {"deploy/.env"}

_OUTSIDE = re.compile(r"\bDESIGN\b|\bseeds/|\bTIME-WINDOWS\b")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
_PATH = re.compile(r"(?<![\w./~-])((?:deploy|docs|node|protocol|tests)/[\w./*-]*[\w/*])")
_ROW = re.compile(r"^\s*\|")
_DELIMITER = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")


def pages() -> list[str]:
    found = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [str(p.relative_to(ROOT)) for p in found]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = _CODE_SPAN.sub(lambda m: m[2], heading).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading: its text
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in _HEADING.findall(_FENCE.sub("", text)):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def _exists(name: str) -> bool:
    """A path, a glob, or a module's attribute (``node/views/episode_reads.walk``)."""
    if "*" in name:
        return any(ROOT.glob(name))
    module, dot, _ = name.rpartition(".")
    return (ROOT / name).exists() or bool(dot and (ROOT / f"{module}.py").exists())


def problems(page: str, text: str) -> list[str]:
    """What in ``text`` (the page ``page``, relative to the repository) points outside the
    repository or at nothing."""
    found = [
        f"{page}: cites {m[0]!r}, which is not in this repository" for m in _OUTSIDE.finditer(text)
    ]
    prose = _FENCE.sub("", text)
    here = (ROOT / page).parent
    for target in _LINK.findall(_CODE_SPAN.sub("", prose)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (here / path).resolve()
        if path and not file.exists():
            found.append(f"{page}: links to {target}, which does not exist")
            continue
        if not anchor or (path and file.suffix != ".md"):
            continue
        if anchor not in anchors(file.read_text(encoding="utf-8") if path else text):
            found.append(f"{page}: links to {target}, which names no heading there")
    for name in _PATH.findall(prose):
        if name not in MADE_BY_THE_READER and not _exists(name.rstrip(".")):
            found.append(f"{page}: names {name}, which is not in this repository")
    return found + broken_tables(page, _FENCE.sub(lambda m: "\n" * m[0].count("\n"), text))


def broken_tables(page: str, prose: str) -> list[str]:
    """Each row that follows a table after blank lines without starting a table of its own
    (a header row and its delimiter row): Markdown shows it as plain text.  ``prose``: the
    page with its code blocks blanked, so the line numbers are the page's."""
    lines = prose.splitlines()
    found, after_table, blank = [], False, False
    for number, line in enumerate(lines, 1):
        if not line.strip():
            blank = True
            continue
        row = bool(_ROW.match(line))
        starts = number < len(lines) and bool(_DELIMITER.match(lines[number]))
        if row and blank and after_table and not starts:
            found.append(f"{page}: a table is broken by a blank line before line {number}")
        after_table, blank = row, False
    return found


@pytest.mark.parametrize("page", pages())
def test_a_page_points_only_at_what_the_repository_holds(page: str) -> None:
    assert problems(page, (ROOT / page).read_text(encoding="utf-8")) == []


def test_every_page_is_checked() -> None:
    assert {"README.md", "docs/cli.md", "docs/mcp.md", "docs/tools/e_timeline.md"} <= set(pages())


def test_the_check_finds_what_it_looks_for() -> None:
    text = "\n".join(
        [
            "# A page",
            "",
            "## Two words: `code`",
            "",
            "As DESIGN §4.1 asks, and seeds/000 says; TIME-WINDOWS §2 too.",
            "[ok](mesh.md#the-peer-table) [self](#two-words-code) [web](https://example.org/x)",
            "[gone](nowhere.md) [bad anchor](mesh.md#no-such-heading) [bad self](#nothing)",
            "See node/views/fold.py, tests/node/test_no_such_file.py and deploy/examples/*.toml.",
            "```",
            "[in code](nowhere-either.md) DESIGN",
            "```",
            "",
            "| a | b |",
            "| --- | --- |",
            "| 1 | 2 |",
            "",
            "| 3 | 4 |",
            "",
            "| c | d |",
            "| - | - |",
        ]
    )
    page = "docs/example.md"
    assert problems(page, text) == [
        f"{page}: cites 'DESIGN', which is not in this repository",
        f"{page}: cites 'seeds/', which is not in this repository",
        f"{page}: cites 'TIME-WINDOWS', which is not in this repository",
        f"{page}: cites 'DESIGN', which is not in this repository",  # in code too
        f"{page}: links to nowhere.md, which does not exist",
        f"{page}: links to mesh.md#no-such-heading, which names no heading there",
        f"{page}: links to #nothing, which names no heading there",
        f"{page}: names tests/node/test_no_such_file.py, which is not in this repository",
        f"{page}: a table is broken by a blank line before line 17",
    ]
