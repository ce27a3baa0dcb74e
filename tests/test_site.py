"""The docs site as a reader gets it (issue 45): built with ``mkdocs build --strict``, then
read.  The API pages show no literal Sphinx role and no private module path; no prose
paragraph of a how-to page is over 150 words; the home page names every guide; and, in a
real browser at 1280×800, no code block is wider than its box, no identifier in a table
breaks across lines and no page scrolls sideways."""

from __future__ import annotations

import functools
import html
import http.server
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

pytestmark = pytest.mark.slow

if TYPE_CHECKING:
    from playwright.sync_api import Page

ROOT = Path(__file__).parent.parent

#: The guides: pages a reader follows to do something (not the reference, the
#: architecture, the benchmarks or the changelog, which are records).
HOW_TO = [
    "index",
    "getting-started",
    "cli",
    "embedding",
    "backends",
    "sessions",
    "supervision",
    "failures",
    "metering",
    "isolation",
    "telemetry",
    "serve",
    "mcp",
    "security",
]
MAX_WORDS = 150
ROLE = re.compile(r":(?:py:)?(?:meth|class|mod|func|data|attr|exc|obj|const):`")
PRIVATE = re.compile(r"coding_genesis\._[a-z]")


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip(
        "mkdocs", reason='the docs extra is not installed: pip install -e ".[docs]"'
    )
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(out)},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def page_of(site: Path, name: str) -> Path:
    return site / "index.html" if name == "index" else site / name / "index.html"


def article(page: Path) -> str:
    """The page's content (not the navigation), as HTML."""
    text = page.read_text()
    start, end = text.find("<article"), text.find("</article>")
    assert start >= 0 and end > start, page
    return text[start:end]


def visible(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", fragment))


def leaks(fragment: str) -> list[str]:
    """The literal Sphinx roles and private module paths a reader would see."""
    text = visible(fragment)
    found = [m.group(0) for m in ROLE.finditer(text)]
    return found + [m.group(0) for m in PRIVATE.finditer(fragment)]


def long_paragraphs(fragment: str) -> list[str]:
    """Paragraphs and list items of more than MAX_WORDS words (their first words)."""
    too_long = []
    for block in re.findall(r"<(?:p|li)>(.*?)</(?:p|li)>", fragment, re.S):
        if "<ul>" in block or "<ol>" in block:  # a list item holding a list: counted apart
            block = re.split(r"<[uo]l>", block, maxsplit=1)[0]
        words = visible(block).split()
        if len(words) > MAX_WORDS:
            too_long.append(f"{len(words)} words: {' '.join(words[:12])}...")
    return too_long


def test_the_checks_catch_what_they_look_for() -> None:
    bad = "<p>See :meth:`Session.send` in <code>coding_genesis._pipeline.run</code>.</p>"
    assert leaks(bad) == [":meth:`", "coding_genesis._p"]
    assert leaks("<p>See <code>Session.send</code> in coding_genesis.session.</p>") == []
    wall = "<p>" + "word " * (MAX_WORDS + 1) + "</p><li>" + "w " * MAX_WORDS + "</li>"
    assert [p.split(":")[0] for p in long_paragraphs(wall)] == [f"{MAX_WORDS + 1} words"]


def test_api_pages_show_no_sphinx_role_and_no_private_path(site: Path) -> None:
    pages = sorted((site / "api").glob("**/index.html"))
    assert len(pages) >= 20
    found = {str(p.relative_to(site)): leaks(article(p)) for p in pages}
    assert not {page: bad for page, bad in found.items() if bad}


def test_api_pages_leave_the_internals_out(site: Path) -> None:
    ids = {
        anchor
        for p in (site / "api").glob("**/index.html")
        for anchor in re.findall(r'id="(coding_genesis\.[\w.]+)"', article(p))
    }
    assert "coding_genesis.agent.CodingGenesisAgent" in ids
    internals = [
        "coding_genesis.session.log",
        "coding_genesis.session.SessionOwner",
        "coding_genesis.session.Session.key",
        "coding_genesis.batch.Executor",
        "coding_genesis.batch.coerce_request",
        "coding_genesis.pool.log",
    ]
    assert not ids & set(internals)


@pytest.mark.parametrize("name", HOW_TO)
def test_how_to_pages_have_no_paragraph_over_150_words(site: Path, name: str) -> None:
    assert not long_paragraphs(article(page_of(site, name)))


def test_the_home_page_names_every_guide(site: Path) -> None:
    home = article(page_of(site, "index"))
    linked = set(re.findall(r'href="([\w-]+)/"', home))
    assert set(HOW_TO) - {"index"} <= linked, set(HOW_TO) - {"index"} - linked


# -- in a browser ------------------------------------------------------------------------

#: What a page shows that a reader cannot see whole: the page scrolling sideways, a code
#: block wider than its box, an identifier of a table broken across lines.
MEASURE = """() => {
  const doc = document.documentElement;
  const clipped = [...document.querySelectorAll("article pre > code, article pre")]
    .filter(el => el.scrollWidth > el.clientWidth + 1)
    .map(el => el.textContent.slice(0, 60));
  const broken = [...document.querySelectorAll("article table code")]
    .filter(el => el.getClientRects().length > 1)
    .map(el => el.textContent);
  return {scroll: doc.scrollWidth - doc.clientWidth, clipped, broken};
}"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture(scope="session")
def served(site: Path) -> Iterator[str]:
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.parametrize("path", ["", "getting-started/", "sessions/", "api/"])
def test_nothing_is_clipped_at_1280_px(served: str, page: Page, path: str) -> None:
    page.goto(f"{served}/{path}", wait_until="load")
    seen = page.evaluate(MEASURE)
    assert seen == {"scroll": 0, "clipped": [], "broken": []}, seen
