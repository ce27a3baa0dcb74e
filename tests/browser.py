"""One browser for the tests that look at the built site: Debian's ``chromium``
(``apt-get install -y chromium``; ``.ci/run`` installs it where apt is available)
driven by Playwright from PyPI, never a browser Playwright downloads.

``browser`` is a context of a fresh profile (its own ``--user-data-dir``, no first-run
screens, no background networking) for the tests of one module; ``page`` a new 1280×800
page per test.  Both skip, saying why, when Playwright or chromium is absent.

Per module, not per session: Playwright's sync API keeps an asyncio event loop running
in this thread while it is open, and a ``run_sync()`` of a later test would find it.
Put a module's browser tests after its others.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Page

__all__ = ["CHROMIUM", "VIEWPORT", "browser", "page"]

CHROMIUM = "/usr/bin/chromium"
VIEWPORT = {"width": 1280, "height": 800}


@pytest.fixture(scope="module")
def browser() -> Iterator[BrowserContext]:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason='playwright is not installed: pip install -e ".[test]"'
    )
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is absent: apt-get install -y chromium")
    profile = tempfile.mkdtemp(prefix="genesis-browser-")
    try:
        with sync_api.sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                profile,
                executable_path=CHROMIUM,
                headless=True,
                args=["--no-sandbox", "--no-first-run", "--disable-background-networking"],
                viewport=VIEWPORT,
            )
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def page(browser: BrowserContext) -> Iterator[Page]:
    opened = browser.new_page()
    opened.set_viewport_size(VIEWPORT)  # type: ignore[arg-type]
    try:
        yield opened
    finally:
        opened.close()
