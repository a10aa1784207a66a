"""The screenshots of docs/web.md: `python -m tests.web.screenshots [DIR]` (default
docs/images). A scratch project with the fake agents: a run that has done two tasks and
is stopped in its third, an agent that asks for permission, notes, a changed file; the
page on a desktop (light and dark), on a phone, and refusing a token."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

from tests.cli.helpers import run_ralph
from tests.loop.conftest import THREE_TASKS, Project, new_repository
from tests.remote.test_serve import TOKEN, serving
from tests.web.conftest import DESKTOP, PHONE, chromium_executable, configure, ready


def make_project(base: Path) -> Project:
    root = base / "shop"
    new_repository(root)
    project = Project(root, base / "plan.json")
    project.prd(THREE_TASKS.replace("First task", "Add the product list")
                .replace("Second task", "Add the cart").replace("Third task", "Check out"))
    configure(project, {"tasks": {
        "1": [{"print": ["I'll list the products from products.json.", "Tests pass."],
               "write": {"products.py": "PRODUCTS = ['tea', 'cake']\n"}, "tick": True}],
        "2": [{"print": ["The cart keeps items per session.", "Adding tests for it."],
               "write": {"cart.py": "class Cart:\n    items: list[str] = []\n"},
               "tick": True}],
        "3": [{"print": ["Checking out needs a payment provider: reading the docs first.",
                         "Writing checkout.py..."], "hang": 600}]}})
    return project


def shoot(page: Page, path: Path, *, full: bool = False) -> None:
    page.wait_for_timeout(400)  # the last frame drawn
    page.screenshot(path=str(path), full_page=full)
    print(f"wrote {path}", file=sys.stderr)


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/images").resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as base:
        project = make_project(Path(base))
        for _ in range(2):
            assert run_ralph("step", cwd=project.root).code == 0
        run_ralph("notes", "add", "--type", "learning", "products.json is the source of "
                  "truth for prices", cwd=project.root)
        run_ralph("notes", "add", "--type", "remaining", "The checkout needs a payment "
                  "provider", cwd=project.root)
        with serving(project.root) as served, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium_executable())
            desk = browser.new_context(viewport=DESKTOP, color_scheme="light").new_page()
            desk.goto(f"{served.http}/?token={TOKEN}")
            ready(desk)
            desk.get_by_role("button", name="Run", exact=True).click()
            desk.locator("#output").get_by_text("Writing checkout.py").wait_for()
            (project.root / "cart.py").write_text("class Cart:\n    items: list[str]\n")
            desk.get_by_label("Prompt").fill("RUN: rm -rf build")
            desk.get_by_label("Session agent").select_option("hooked")
            desk.get_by_label("Approvals").select_option("ask")
            desk.get_by_role("button", name="Start session").click()
            desk.get_by_role("article").wait_for()
            desk.get_by_role("region", name="Changes").get_by_role(
                "button", name="Not staged cart.py").click()
            desk.get_by_role("region", name="Diff").wait_for()
            desk.evaluate("window.scrollTo(0, 0)")
            shoot(desk, out / "web-desktop.png", full=True)
            dark = browser.new_context(viewport=DESKTOP, color_scheme="dark").new_page()
            dark.goto(f"{served.http}/?token={TOKEN}")
            ready(dark)
            shoot(dark, out / "web-desktop-dark.png")
            phone = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True,
                                        device_scale_factor=2).new_page()
            phone.goto(f"{served.http}/?token={TOKEN}")
            ready(phone)
            phone.get_by_role("article").wait_for()
            shoot(phone, out / "web-phone.png")
            phone.get_by_role("region", name="Iterations").scroll_into_view_if_needed()
            shoot(phone, out / "web-phone-history.png")
            refused = browser.new_context(viewport=PHONE, is_mobile=True,
                                          device_scale_factor=2).new_page()
            refused.goto(f"{served.http}/?token=wrong")
            refused.get_by_role("heading", name="Token rejected").wait_for()
            shoot(refused, out / "web-token-rejected.png")
            desk.get_by_role("button", name="Stop", exact=True).click()
            desk.get_by_role("button", name="Stop session").click()
            desk.locator("#loop-state").get_by_text("idle").wait_for()
            browser.close()
    if shutil.which("optipng"):
        subprocess.run(["optipng", "-quiet", *map(str, out.glob("web-*.png"))], check=False)


if __name__ == "__main__":
    main()
