"""The web monitor's tests: `ralph serve` as a real process on a project with the fake
agents, and the page in a real headless Chromium (Debian's `chromium`, which `make test`
installs; $RALPH_CHROMIUM names another) driven by Playwright."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, ViewportSize, sync_playwright

from tests.loop.conftest import Project, project
from tests.remote.test_serve import TOKEN, Served, serving

FAKE_CLAUDE = Path(__file__).parents[1] / "sessions" / "fake_claude.py"
WAIT_MS = 30_000  # what a page gets to show something (a loaded machine is slow)
PHONE: ViewportSize = {"width": 390, "height": 844}
DESKTOP: ViewportSize = {"width": 1280, "height": 900}

__all__ = ["project"]  # the loop tests' project fixture


def chromium_executable() -> str:
    """The Chromium the tests drive: $RALPH_CHROMIUM, else `chromium` on the PATH."""
    given = os.environ.get("RALPH_CHROMIUM") or shutil.which("chromium") \
        or shutil.which("chromium-browser")
    if not given:
        pytest.fail("the web monitor's tests need Chromium: `make test` installs Debian's "
                    "`chromium` when run as root; otherwise run `sudo apt-get install -y "
                    "chromium`, or set RALPH_CHROMIUM to a Chromium or Chrome binary",
                    pytrace=False)
    return given


@dataclass
class Browsing:
    """A browser, and the pages opened in it (each with its own context: its own
    sessionStorage, as another tab or another person's browser)."""

    browser: Browser
    served: Served | None = None
    contexts: list[BrowserContext] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # page errors: a test fails on any

    def open(self, path: str = f"/?token={TOKEN}", *, viewport: ViewportSize = DESKTOP,
             color_scheme: Any = "light", wait: bool = True,
             before: Callable[[Page], None] | None = None, **options: Any) -> Page:
        """A page of `path` in a new context; `before(page)` is called before it loads."""
        assert self.served is not None
        context = self.browser.new_context(viewport=viewport,
                                           color_scheme=color_scheme, **options)
        self.contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        page.on("pageerror", lambda error: self.errors.append(f"{page.url}: {error}"))
        page.on("console", lambda message: self.errors.append(f"console: {message.text}")
                if message.type == "error" and not expected_error(message.text) else None)
        if before is not None:
            before(page)
        page.goto(self.served.http + path)
        if wait:
            ready(page)
        return page


def expected_error(text: str) -> bool:
    """What Chromium says on the console when the server refuses a token (the page asks
    /api/status why its WebSocket was refused) or is away (a reconnect): not a bug."""
    return "/ws" in text or "status of 401" in text or "ERR_CONNECTION_REFUSED" in text


def ready(page: Page) -> None:
    """Until the page is connected and has loaded everything once."""
    page.wait_for_selector("body[data-ready=true]", state="attached")


@pytest.fixture
def browsing() -> Iterator[Browsing]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_executable())
        browsing = Browsing(browser)
        try:
            yield browsing
        finally:
            for context in browsing.contexts:
                context.close()
            browser.close()
    assert not browsing.errors, browsing.errors


def configure(project: Project, plan: dict[str, Any]) -> None:
    """The loop's fake agent playing `plan`, and session agents: `echo` (prints its prompt)
    and `hooked` (a fake Claude Code that asks before each `RUN:` line of its prompt)."""
    project.plan(plan)
    hooked = json.dumps([sys.executable, str(FAKE_CLAUDE), "-p"])
    project.config('\n[agents.echo]\nargv = ["sh", "-c", "cat; echo; echo finished"]\n\n'
                   f'[agents.hooked]\nadapter = "claude"\nargv = {hooked}\n')
    project.commit("configure")


@pytest.fixture
def web(project: Project, browsing: Browsing) -> Iterator[tuple[Project, Browsing]]:
    """The loop tests' project (git, a 3-task PRD), served, with a browser."""
    configure(project, {"default": {"print": ["working on it"], "tick": True}})
    with serving(project.root) as served:
        browsing.served = served
        yield project, browsing


def until(predicate: Callable[[], bool], page: Page, what: str) -> None:
    """Poll `predicate` (page state read from Python) until true, or fail naming `what`."""
    for _ in range(WAIT_MS // 100):
        if predicate():
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"the page never showed {what}")

