"""Fixtures for the web view in a real browser (tests/browser/browserkit.py): one headless
Chromium for the session; an event loop on a thread of its own; a new node and its web view
for a test; a screenshot of every page a test looks at, kept in ``SCREENSHOTS``.

Without the browser the tests skip, saying why, except under ``CI=true``, where they fail:
CI has installed it, and a skip there would hide that it did not.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from tests.browser.browserkit import SCREENSHOTS, Loop, Shot, Site, chromium, missing, whole_page


@pytest.fixture(scope="session")
def browser() -> Iterator[WebDriver]:
    """Headless Chromium, for the whole session; given its driver's path, Selenium fetches
    nothing."""
    absent = missing()
    if absent is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the browser tests cannot run under CI: {absent}")
        print(f"skipping the browser tests: {absent}")
        pytest.skip(absent)
    driver = chromium()
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def page(browser: WebDriver) -> Iterator[WebDriver]:
    """The session's browser with no cookies, before and after the test (cookies are kept
    per host, not per port, so one test's sign-in would reach the next one's node)."""
    browser.execute_cdp_cmd("Network.clearBrowserCookies", {})
    yield browser
    browser.execute_cdp_cmd("Network.clearBrowserCookies", {})


@pytest.fixture
def shot(page: WebDriver, request: pytest.FixtureRequest) -> Shot:
    """Saves what the browser shows as ``SCREENSHOTS/<test>-<n>-<label>.png``."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    test = re.sub(r"[^\w-]+", "_", request.node.name)
    taken: list[Path] = []

    def take(label: str) -> Path:
        path = SCREENSHOTS / f"{test}-{len(taken) + 1:02d}-{label}.png"
        path.write_bytes(whole_page(page))
        taken.append(path)
        return path

    return take


@pytest.fixture(scope="session")
def loop() -> Iterator[Loop]:
    running = Loop()
    yield running
    running.close()


@pytest.fixture
def site(loop: Loop, tmp_path: Path) -> Iterator[Site]:
    """A new node and its web view, for one test."""
    with Site(loop, tmp_path / "node") as opened:
        yield opened
