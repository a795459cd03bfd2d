"""The web view (docs/web.md) in a real browser, headless Chromium: signing in through the form
and out again, the timeline, search's marks, what the content security policy stops, hostile
SRs shown as the text they are, a page that is the same whatever the token cannot read, a
record and its history opened from the timeline, paging through the changes, and the mesh
page of two syncing nodes.  Each page looked at is saved as a screenshot (conftest
``SCREENSHOTS``)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.wait import WebDriverWait
from starlette.types import Receive, Scope, Send

from node.address import Listen
from node.mesh import service as sync_service
from node.mesh.service import SyncService
from node.node import Node
from node.web import changes
from node.web.app import _Headers
from protocol.timefmt import format_instant
from tests.browser.browserkit import WAIT, Loop, Shot, Site, served_app
from tests.node.bundlekit import caller
from tests.node.helpers import Wall
from tests.node.servekit import certified_mesh
from tests.node.synckit import FAST, converged

SECOND = 1000
JUDGED = Path(__file__).resolve().parents[1] / "judged"
HOSTILE = ("<script>alert(1)</script>", '"><img src=x onerror=alert(1)>')
# A page whose inline script and inline style show whether they ran: the title it ends with,
# and the paragraph's colour.
INLINE = (
    b"<!doctype html><html><head><title>inert</title></head><body>"
    b"<p id=styled style='color: rgb(255, 0, 0)'>styled</p>"
    b"<script>document.title='ran'</script></body></html>"
)
RED = "rgba(255, 0, 0, 1)"
_FIXED = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"  # an instant with three digits of millisecond


def _write(
    site: Site, *titles: str, workspace: str = "team", principal: str = "alice", **args: object
) -> list[str]:
    """SRs written a second apart, oldest first (by alice in team unless told); their ids."""

    async def writing(node: Node) -> list[str]:
        who = await caller(node, workspace, principal)
        ids = []
        for title in titles:
            site.wall.now += SECOND
            written = await node.e_write(who, title=title, text=f"about {title}", **args)
            ids.append(written["sr_id"])
        return ids

    return site.run(writing)


def _token(site: Site, principal: str = "alice") -> str:
    async def making(node: Node) -> str:
        return (await node.create_token(principal, "team", ("read:workspace",))).token

    return site.run(making)


def _arrived(page: WebDriver, url: str) -> None:
    WebDriverWait(page, WAIT).until(ec.url_to_be(url))


def _sign_in(page: WebDriver, site: Site, token: str) -> None:
    """Types ``token`` into the sign-in form and sends it, as a person would."""
    page.get(site.url("/signin"))
    page.find_element(By.ID, "token").send_keys(token)
    page.find_element(By.CSS_SELECTOR, "main form button[type=submit]").click()


def _titles(page: WebDriver) -> list[str]:
    """The titles shown, without their badges."""
    return [_badged(h)[0] for h in page.find_elements(By.CSS_SELECTOR, "article.sr h2")]


def _badged(heading: WebElement) -> tuple[str, list[str]]:
    """A title as its heading shows it, and the badges after it."""
    badges = [b.text for b in heading.find_elements(By.CLASS_NAME, "badge")]
    return heading.text.removesuffix("".join(f" {b}" for b in badges)), badges


def _nav(page: WebDriver) -> list[str]:
    return [a.text for a in page.find_elements(By.CSS_SELECTOR, "header nav a")]


def test_signing_in_the_timeline_and_signing_out(page: WebDriver, site: Site, shot: Shot) -> None:
    _write(site, "the plan", "the lunch", "the retro")
    page.get(site.url("/timeline"))
    _arrived(page, site.url("/signin"))
    shot("signin")
    _sign_in(page, site, "mlt_not-a-token")
    WebDriverWait(page, WAIT).until(ec.presence_of_element_located((By.CLASS_NAME, "problem")))
    assert page.find_element(By.CLASS_NAME, "problem").text == "That token does not sign in."
    assert "the plan" not in page.page_source
    shot("refused")
    _sign_in(page, site, _token(site))
    _arrived(page, site.url("/timeline"))
    shot("timeline")
    assert page.title == "Timeline — memlane"
    assert _titles(page) == ["the retro", "the lunch", "the plan"]
    metas = [m.text for m in page.find_elements(By.CSS_SELECTOR, "article.sr .meta")]
    assert all(f"by alice on {site.node.info.node_id}" in m for m in metas), metas
    assert "alice in team" in page.find_element(By.TAG_NAME, "header").text
    # A token without admin:workspace is offered no page that would refuse it.
    assert _nav(page) == ["Timeline", "Search", "Changes", "Episodes", "Activity"]
    page.find_element(By.XPATH, "//button[text()='Sign out']").click()
    _arrived(page, site.url("/signin"))
    page.get(site.url("/timeline"))
    _arrived(page, site.url("/signin"))
    shot("signed-out")
    assert "the plan" not in page.page_source


def test_search_marks_the_matched_words(page: WebDriver, site: Site, shot: Shot) -> None:
    async def writing(node: Node) -> None:
        who = await caller(node)
        await node.e_write(who, title="Deploy notes", text="We deployed <b>twice</b> on Monday")
        await node.e_write(who, title="lunch", text="nothing about it")

    site.run(writing)
    _sign_in(page, site, _token(site))
    _arrived(page, site.url("/timeline"))
    page.find_element(By.LINK_TEXT, "Search").click()
    _arrived(page, site.url("/search"))
    field = page.find_element(By.NAME, "query")
    field.send_keys("deploying")
    field.submit()
    _arrived(page, site.url("/search?query=deploying"))
    shot("search")
    assert [m.text for m in page.find_elements(By.TAG_NAME, "mark")] == ["Deploy", "deployed"]
    assert _titles(page) == ["Deploy notes"]
    text = page.find_element(By.CSS_SELECTOR, "article.sr .text").text
    assert text == "We deployed <b>twice</b> on Monday"
    assert page.find_elements(By.CSS_SELECTOR, "article.sr b") == []


def test_search_shows_the_best_first(page: WebDriver, site: Site, shot: Shot) -> None:
    """The judged record-style set (tests/judged/, as ``memlane import`` brings it): the
    record titled exactly "Gateway" heads the page for ``gateway``, ranks in order."""

    async def importing(node: Node) -> None:
        who = await caller(node)
        report = await node.import_file(who, JUDGED / "memory.jsonl", "mcp-memory")
        assert report.written > 150

    site.run(importing)
    _sign_in(page, site, _token(site))
    _arrived(page, site.url("/timeline"))
    page.get(site.url("/search?query=gateway"))
    shot("search-best-first")
    assert _titles(page)[0] == "Gateway"
    metas = [m.text for m in page.find_elements(By.CSS_SELECTOR, "article.sr .meta")]
    ranks = [int(m.split()[1]) for m in metas]
    assert ranks == sorted(ranks)
    assert ranks[:3] == [1, 2, 3]


async def _inline(_scope: Scope, _receive: Receive, send: Send) -> None:
    """Serves ``INLINE``."""
    head = [(b"content-type", b"text/html; charset=utf-8")]
    await send({"type": "http.response.start", "status": 200, "headers": head})
    await send({"type": "http.response.body", "body": INLINE})


@pytest.mark.parametrize(
    ("guarded", "title", "red"), [(False, "ran", True), (True, "inert", False)]
)
def test_the_policy_stops_inline_script_and_style(
    page: WebDriver, loop: Loop, shot: Shot, guarded: bool, title: str, red: bool
) -> None:
    """The view's headers (``_Headers``) on a page with an inline script and style: neither
    runs; without them (the control, so the test can fail) both do."""
    with served_app(loop, _Headers(_inline) if guarded else _inline) as port:
        page.get(f"http://127.0.0.1:{port}/")
        WebDriverWait(page, WAIT).until(
            lambda p: p.execute_script("return document.readyState") == "complete"
        )
        shot("guarded" if guarded else "unguarded")
        assert page.title == title
        colour = page.find_element(By.ID, "styled").value_of_css_property("color")
        assert (colour == RED) is red


def test_hostile_titles_show_as_their_text(page: WebDriver, site: Site, shot: Shot) -> None:
    _write(site, *HOSTILE)
    _sign_in(page, site, _token(site))
    _arrived(page, site.url("/timeline"))
    shot("hostile")
    assert _titles(page) == list(reversed(HOSTILE))
    texts = [t.text for t in page.find_elements(By.CSS_SELECTOR, "article.sr .text")]
    assert texts == [f"about {t}" for t in reversed(HOSTILE)]
    assert page.find_elements(By.TAG_NAME, "img") == []
    assert page.find_elements(By.TAG_NAME, "script") == []
    with pytest.raises(NoAlertPresentException):
        page.switch_to.alert.accept()


def test_the_timeline_is_the_same_whatever_the_token_cannot_read(
    page: WebDriver, site: Site, shot: Shot
) -> None:
    """Alice's timeline in the browser, before and after SRs she cannot read are written (bob's
    private one, carol's in another workspace): the same, byte for byte; bob's shows his."""
    _write(site, "shared plan")
    _sign_in(page, site, _token(site))
    _arrived(page, site.url("/timeline"))
    before = page.page_source
    _write(site, "bob's secret", principal="bob", visibility="private")
    _write(site, "other work", principal="carol", workspace="other")
    page.refresh()
    shot("alice")
    assert page.page_source == before
    assert _titles(page) == ["shared plan"]
    page.execute_cdp_cmd("Network.clearBrowserCookies", {})
    _sign_in(page, site, _token(site, "bob"))
    _arrived(page, site.url("/timeline"))
    shot("bob")
    headings = page.find_elements(By.CSS_SELECTOR, "article.sr h2")
    assert [_badged(h) for h in headings] == [("bob's secret", ["private"]), ("shared plan", [])]


def _changed(page: WebDriver) -> list[str]:
    """The SRs of the changes shown, in order."""
    return [c.text for c in page.find_elements(By.CSS_SELECTOR, "article.change h3 code")]


def _window(page: WebDriver) -> str:
    return page.find_element(By.CSS_SELECTOR, "p.window").text


def test_paging_through_the_changes(
    page: WebDriver, site: Site, shot: Shot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twelve new SRs, five a page (the page module's size, made small): "next page" walks
    them newest first, each once, and the last page offers no next one."""
    monkeypatch.setattr(changes, "PAGE_SIZE", 5)
    ids = _write(site, *(f"change {i}" for i in range(12)))
    _sign_in(page, site, _token(site))
    _arrived(page, site.url("/timeline"))
    page.find_element(By.LINK_TEXT, "Changes").click()
    _arrived(page, site.url("/changes"))
    seen, windows = [_changed(page)], [_window(page)]
    shot("changes-1")
    for number in (2, 3):
        page.find_element(By.LINK_TEXT, "next page").click()
        WebDriverWait(page, WAIT).until(ec.url_contains(f"page={number}"))
        seen.append(_changed(page))
        windows.append(_window(page))
        shot(f"changes-{number}")
    assert [len(s) for s in seen] == [5, 5, 2]
    assert [i for s in seen for i in s] == list(reversed(ids))
    assert len(set(windows)) == 1, windows  # every page reads page 1's window
    assert page.find_elements(By.LINK_TEXT, "next page") == []
    kinds = {k.text for k in page.find_elements(By.CSS_SELECTOR, "article.change .kind")}
    assert kinds == {"new"}


async def _syncing(one: Node, two: Node, services: list[SyncService]) -> None:
    """Two nodes of one mesh syncing over mutual TLS on loopback as ``memlane serve`` runs
    them, each having written an SR, until both hold the same (``services``: those started)."""
    first, second = SyncService(one, options=FAST), SyncService(two, options=FAST)
    services.append(first)
    await first.start(Listen("127.0.0.1", 0), [])
    assert first.address is not None
    services.append(second)
    await second.start(None, [Listen(*first.address)])
    await one.e_write(await caller(one), title="from one", text="a")
    await two.e_write(await caller(two, principal="bob"), title="from two", text="b")
    await converged([one, two], [first.sync, second.sync])


async def _own_head(node: Node) -> tuple[str, str, str]:
    """The node's own log as the logs table shows it: writer, last seq, head entry."""
    (log,) = [r for r in await node.reader().select_logs() if r.writer == node.key.public]
    assert log.head_id is not None
    return node.info.node_id, str(log.head_seq), log.head_id.hex()


def _rows(page: WebDriver, table: str) -> list[list[str]]:
    """The cells of each row of ``table.<table>`` (its header left out)."""
    rows = page.find_elements(By.CSS_SELECTOR, f"table.{table} tr")
    return [[td.text for td in tr.find_elements(By.TAG_NAME, "td")] for tr in rows[1:]]


def _peer_live(page: WebDriver, peer: str) -> bool:
    """Whether the page, loaded again, shows ``peer`` live (the snapshot sync saves comes at
    its own interval, made short)."""
    page.refresh()
    return any(r[0] == peer and r[3] == "live" for r in _rows(page, "peers"))


def test_the_mesh_page_of_two_syncing_nodes(
    page: WebDriver, loop: Loop, tmp_path: Path, shot: Shot, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sync_service, "LOOK_INTERVAL", 0.05)
    dirs = certified_mesh(tmp_path, ["one", "two"])
    now = Wall(int(time.time() * 1000))  # (the certificates are valid from now)
    services: list[SyncService] = []
    with (
        Site(loop, dirs["one"], wall=now, made=True) as one,
        Site(loop, dirs["two"], wall=now, made=True) as two,
    ):
        try:
            loop.run(_syncing(one.node, two.node, services))
            heads = [loop.run(_own_head(n)) for n in (one.node, two.node)]
            admin = one.run(lambda n: n.create_token("root", "team", ("admin:workspace",)))
            _sign_in(page, one, admin.token)
            _arrived(page, one.url("/timeline"))
            page.find_element(By.LINK_TEXT, "Mesh").click()
            _arrived(page, one.url("/mesh"))
            WebDriverWait(page, WAIT).until(lambda p: _peer_live(p, two.node.info.node_id))
            shot("mesh")
            logs = {(r[0], r[2], r[3]) for r in _rows(page, "logs")}
            members = [r[0] for r in _rows(page, "members")]
            audit = _rows(page, "audit")
            events = {r[1] for r in audit}
            shown = page.find_element(By.CSS_SELECTOR, "code.node-id").text
            expiries = {r[0]: r[4] for r in _rows(page, "members")}
            unbroken = _unbroken(page, "table.grid code, table.grid td.instant")
        finally:
            for service in reversed(services):
                loop.run(service.close())
    one_id, two_id = heads[0][0], heads[1][0]
    assert shown == one_id
    assert {(f"{one_id} (this node)", *heads[0][1:]), heads[1]} <= logs, logs
    assert f"{one_id} (this node)" in members
    assert two_id in members
    assert {"sr_written", "sr_synced"} <= events
    assert expiries[f"{one_id} (this node)"] == "never"  # the authority's own node
    assert all(re.fullmatch(_FIXED, r[2]) for r in audit), audit  # instants line up
    assert unbroken == (True, True), unbroken  # every instant and id on one line


def _unbroken(page: WebDriver, selector: str) -> tuple[bool, bool]:
    """Whether the elements ``selector`` finds are set not to wrap, and each lies on one
    line (its text's boxes at one height: a string broken mid-way has two)."""
    found = page.find_elements(By.CSS_SELECTOR, selector)
    assert found
    nowrap = all(e.value_of_css_property("white-space") == "nowrap" for e in found)
    lines = page.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]), e => {"
        " const r = document.createRange(); r.selectNodeContents(e);"
        " return new Set(Array.from(r.getClientRects(), c => Math.round(c.top))).size; });",
        selector,
    )
    return nowrap, all(n <= 1 for n in lines)


def _versions(page: WebDriver) -> list[str]:
    """Each version's line on the record page, newest first: its kind, when, who, which node."""
    return [w.text for w in page.find_elements(By.CSS_SELECTOR, "ol.versions p.when")]


def test_a_record_and_its_history_opened_from_the_timeline(
    page: WebDriver, site: Site, shot: Shot
) -> None:
    """A title on the timeline opens the SR's record: its current state and its versions (a
    write, then bob's correction a minute later), and the SR linking to it, a click away."""
    (plan,) = _write(site, "the plan")
    written = format_instant(site.wall.now, fixed=True)  # .000Z: instants line up
    (retro,) = _write(site, "the retro", links=[plan])

    async def correcting(node: Node) -> None:
        site.wall.now += 60 * SECOND
        await node.e_correct(
            await caller(node, principal="bob"), sr_id=plan, text="ship on monday", reason="moved"
        )

    site.run(correcting)
    node_id = site.node.info.node_id
    _sign_in(page, site, _token(site))
    _arrived(page, site.url("/timeline"))
    page.find_element(By.LINK_TEXT, "the plan").click()
    _arrived(page, site.url(f"/record?sr_id={plan}"))
    shot("record")
    assert page.title == "Record — memlane"
    assert _titles(page) == ["the plan"]
    assert page.find_element(By.CSS_SELECTOR, "article.record .text").text == "ship on monday"
    corrected = format_instant(site.wall.now, fixed=True)
    assert _versions(page) == [
        f"corrected at {corrected} by bob on {node_id}",
        f"written at {written} by alice on {node_id}",
    ]
    # The correction's change, before and after; "corrected" says what its flag would.
    diff = page.find_elements(By.CSS_SELECTOR, "ol.versions table.diff tr")
    cells = [[c.text for c in tr.find_elements(By.CSS_SELECTOR, "th, td")] for tr in diff]
    assert cells == [["field", "before", "after"], ["text", "about the plan", "ship on monday"]]
    page.find_element(By.LINK_TEXT, "the retro").click()
    _arrived(page, site.url(f"/record?sr_id={retro}"))
    shot("linked")
    assert _titles(page) == ["the retro"]
    assert [v.split(" ")[0] for v in _versions(page)] == ["written"]
    assert page.find_element(By.CSS_SELECTOR, "ul.links a").text == "the plan"


def _fields(page: WebDriver) -> list[tuple[str, str | None]]:
    """The value and placeholder of each text field of the page's form."""
    found = page.find_elements(By.CSS_SELECTOR, "main form input[type=text]")
    return [(f.get_attribute("value") or "", f.get_dom_attribute("placeholder")) for f in found]


def test_the_forms_say_what_they_show(page: WebDriver, site: Site, shot: Shot) -> None:
    """The timeline's orders in words (the tool's values sent); the window's fields empty
    until filled, with no example that reads as a value; activity says which window it
    counts and what its number is."""
    _write(site, "the plan", "the retro")
    _sign_in(page, site, _token(site))
    _arrived(page, site.url("/timeline"))
    assert _fields(page) == [("", None), ("", None)]
    menu = Select(page.find_element(By.NAME, "order_by"))
    assert [(o.text, o.get_attribute("value")) for o in menu.options] == [
        ("newest ingested first", "ingest_time_desc"),
        ("oldest ingested first", "ingest_time_asc"),
        ("newest content time first", "content_time_desc"),
        ("oldest content time first", "content_time_asc"),
    ]
    menu.select_by_visible_text("oldest ingested first")
    page.find_element(By.CSS_SELECTOR, "main form button[type=submit]").click()
    WebDriverWait(page, WAIT).until(ec.url_contains("order_by=ingest_time_asc"))
    shot("timeline-oldest-first")
    assert _titles(page) == ["the plan", "the retro"]
    page.find_element(By.LINK_TEXT, "Activity").click()
    _arrived(page, site.url("/activity"))
    shot("activity")
    assert _fields(page) == [("", None), ("", None)]
    hour = 3600 * SECOND
    end = -(-(site.wall.now + 1) // hour) * hour  # the default window: the last 48 hours
    start, end = (format_instant(t, fixed=True) for t in (end - 48 * hour, end))
    window = page.find_element(By.CSS_SELECTOR, "p.window").text
    assert window == f"2 versions written from {start} to {end} (UTC), counted per hour"
