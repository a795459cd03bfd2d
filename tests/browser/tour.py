"""The pictures in docs/web.md and the README: ``python -m tests.browser.tour [DIR]`` (default
``docs/img``) writes a node with a few days of an agent team's memory, serves its web view and
saves each page as headless Chromium shows it, as ``web-<page>.png``.  Not a test; rerun it when
a page's look changes."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from node.access.callers import Caller
from node.node import Node
from protocol.timefmt import format_instant
from tests.browser.browserkit import Loop, Site, chromium, whole_page
from tests.node.bundlekit import caller

HOUR = 3_600_000
_NOTES = [  # (hours after the start, who, title, text, tags)
    (0, "alice", "Deploy window moved to Tuesday", "Ops asked for Tuesday 14:00 UTC.", ["ops"]),
    (1, "bob", "Backup job failing on node-3", "Disk full on /var; rotated logs.", ["ops"]),
    (3, "alice", "Customer asked about SSO", "Wants SAML before the renewal.", ["sales"]),
    (5, "carol", "Deploy checklist", "Freeze, tag, deploy, watch errors 30 min.", ["ops"]),
    (26, "bob", "Release notes drafted", "Covers search ranking and the web view.", []),
    (28, "carol", "Incident review: the failed deploy", "Rolled back in 4 minutes.", ["ops"]),
    (30, "alice", "SSO estimate", "Three weeks with the SAML library.", ["sales"]),
]


async def _memory(node: Node, site: Site) -> tuple[str, int]:
    """The notes, a correction, a link and a few episodes; alice's reading token, and when
    the second day's work began."""
    start = site.wall.now
    who: dict[str, Caller] = {p: await caller(node, principal=p) for p in ("alice", "bob", "carol")}
    ids = []
    for hours, principal, title, text, tags in _NOTES:
        site.wall.now = start + hours * HOUR
        written = await node.e_write(who[principal], title=title, text=text, tags=tags)
        ids.append(written["sr_id"])
    site.wall.now = start + 31 * HOUR
    await node.e_write(who["carol"], sr_id=ids[5], links=[ids[0], ids[3]])
    await node.e_correct(
        who["bob"],
        sr_id=ids[0],
        text="Ops asked for Tuesday 15:00 UTC.",
        reason="the time was wrong",
    )
    for summary, tool in (("indexed the runbooks", "search"), ("drafted release notes", "write")):
        site.wall.now += HOUR // 4
        await node.work_record(who["alice"], summary=summary, tool=tool)
    token = (await node.create_token("alice", "team", ("read:workspace",))).token
    return token, start + 27 * HOUR


def _visit(page: WebDriver, site: Site, path: str, out: Path, name: str) -> None:
    page.get(site.url(path))
    (out / f"web-{name}.png").write_bytes(whole_page(page))


def tour(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    loop, page = Loop(), chromium()
    try:
        with tempfile.TemporaryDirectory() as tmp, Site(loop, Path(tmp) / "node") as site:
            token, second_day = site.run(lambda node: _memory(node, site))
            page.get(site.url("/signin"))
            page.find_element(By.ID, "token").send_keys(token)
            page.find_element(By.CSS_SELECTOR, "main form button[type=submit]").click()
            for path, name in (
                ("/timeline", "timeline"),
                ("/search?query=deploy", "search"),
                (f"/changes?since={format_instant(second_day)}", "changes"),
                ("/activity?by=hour", "activity"),
                ("/episodes", "episodes"),
            ):
                _visit(page, site, path, out, name)
            page.get(site.url("/search?query=deploy+window"))
            page.find_element(By.PARTIAL_LINK_TEXT, "Deploy window").click()
            (out / "web-record.png").write_bytes(whole_page(page))
    finally:
        page.quit()
        loop.close()


if __name__ == "__main__":
    tour(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/img"))
