"""The web monitor in a real headless Chromium against `ralph serve` with the fake agents:
the token, the loop (tasks, progress, Run, live output, Stop), permission requests answered
from another browser, notes and changes live on every client, a reconnect that catches up
without duplicates, the phone width and dark mode, and the bounds."""

from __future__ import annotations

import re
import signal
import socket
import urllib.request

from playwright.sync_api import Locator, Page, Route, WebSocket, WebSocketRoute, expect

from ralph.store import Store
from ralph.testing.history import record_history
from tests.cli.helpers import TIMEOUT, run_ralph
from tests.loop.conftest import Project
from tests.remote.test_serve import TOKEN, serving
from tests.web.conftest import PHONE, WAIT_MS, Browsing, configure, ready, until

expect.set_options(timeout=WAIT_MS)
REGIONS = ["Tasks", "Iterations", "Live output", "Sessions", "Notes", "Changes"]
BUTTONS = ["Run", "Step", "Pause", "Resume", "Stop", "Start session", "Add note"]


def region(page: Page, name: str) -> Locator:
    return page.get_by_role("region", name=name, exact=True)


def output_text(page: Page) -> str:
    return str(page.locator("#output").text_content() or "")


def start_session(page: Page, prompt: str, agent: str, approvals: str = "auto") -> None:
    """Start an agent session from the page's form."""
    page.get_by_label("Prompt").fill(prompt)
    page.get_by_label("Session agent").select_option(agent)
    page.get_by_label("Approvals").select_option(approvals)
    page.get_by_role("button", name="Start session").click()


def test_the_page_is_open_and_the_api_is_not(web: tuple[Project, Browsing]) -> None:
    _, browsing = web
    assert browsing.served is not None
    http = browsing.served.http
    with urllib.request.urlopen(http + "/", timeout=TIMEOUT) as response:
        assert response.status == 200
        assert "default-src 'none'" in response.headers["Content-Security-Policy"]
        assert response.headers["Referrer-Policy"] == "no-referrer"
        assert b'<main id="app"' in response.read()
    with urllib.request.urlopen(http + "/web/js/main.js", timeout=TIMEOUT) as response:
        assert "javascript" in response.headers["Content-Type"]
        assert response.headers["X-Content-Type-Options"] == "nosniff"
    for path in ("/api/status", "/api/rpc/discover", "/web/../ralph.toml"):
        try:
            urllib.request.urlopen(http + path, timeout=TIMEOUT)
        except urllib.error.HTTPError as exc:
            assert exc.code in (401, 404), path
        else:
            raise AssertionError(f"{path} answered without a token")


def test_a_wrong_or_missing_token_is_refused_and_the_right_one_connects(
        web: tuple[Project, Browsing]) -> None:
    _, browsing = web
    assert browsing.served is not None
    page = browsing.open("/?token=not-the-token", wait=False)
    expect(page.get_by_role("heading", name="Token rejected")).to_be_visible()
    expect(page.get_by_role("status", name="Connection")).to_have_text("Token rejected")
    expect(page.get_by_text("did not accept the token")).to_be_visible()
    assert page.url == browsing.served.http + "/"  # the token left the address bar
    expect(page.locator("#app")).to_be_hidden()

    nothing = browsing.open("/", wait=False)
    expect(nothing.get_by_text("was given none")).to_be_visible()
    how = nothing.get_by_role("region", name="Token rejected")
    expect(how).to_contain_text("printed by ralph serve when it starts (the line token: …)")
    expect(how).to_contain_text(f"{browsing.served.http}/?token=TOKEN")
    nothing.get_by_role("textbox", name="Token").fill(TOKEN)
    nothing.get_by_role("button", name="Connect").click()
    ready(nothing)
    expect(nothing.get_by_role("status", name="Connection")).to_have_text("Connected")
    expect(nothing.get_by_role("heading", name="Token rejected")).to_be_hidden()

    right = browsing.open(f"/?token={TOKEN}&x=1#top")
    assert right.url == browsing.served.http + "/?x=1#top"
    assert right.evaluate("sessionStorage.getItem('ralph.token')") == TOKEN
    right.reload()  # the token stays with the tab, not in the address
    ready(right)
    expect(right.get_by_role("status", name="Connection")).to_have_text("Connected")
    expect(right.locator("#project")).to_have_text(browsing.served.root.name)


def test_run_shows_live_output_and_moves_the_progress_and_stop_stops(
        web: tuple[Project, Browsing]) -> None:
    project, browsing = web
    project.plan({"tasks": {"1": [{"print": ["first task output"], "tick": True}],
                            "2": [{"print": ["second task begins"], "hang": 120}]}})
    page = browsing.open()
    tasks = region(page, "Tasks").get_by_role("listitem")
    expect(tasks).to_have_count(3)
    expect(tasks.nth(0)).to_contain_text("First task")
    progress = page.get_by_role("progressbar", name="Progress")
    expect(progress).to_have_attribute("aria-valuenow", "0")
    expect(progress).to_have_attribute("aria-valuemax", "3")
    expect(page.locator("#loop-state")).to_have_text("idle")

    page.get_by_role("button", name="Run", exact=True).click()
    live = region(page, "Live output")
    expect(live).to_contain_text("first task output")
    expect(progress).to_have_attribute("aria-valuenow", "1")
    expect(page.locator("#progress-text")).to_have_text("1/3 done")
    iterations = region(page, "Iterations").get_by_role("listitem")
    expect(iterations).to_have_count(1)
    expect(iterations.first).to_contain_text("#1 First task")
    expect(iterations.first).to_contain_text("verified")
    expect(live).to_contain_text("second task begins")
    expect(page.locator("#loop-state")).to_have_text("running")
    expect(page.get_by_label("Current iteration")).to_contain_text("Second task")
    expect(tasks.nth(0)).to_contain_text("done")

    page.get_by_role("button", name="Stop", exact=True).click()
    expect(page.locator("#loop-state")).to_have_text("idle")
    expect(live).to_contain_text("run stopped: stopped")
    expect(page.get_by_role("button", name="Run", exact=True)).to_be_enabled()
    expect(page.get_by_label("Current iteration")).to_be_hidden()
    expect(iterations).to_have_count(2)
    expect(iterations.first).to_contain_text("stopped")
    status = run_ralph("status", "--json", cwd=project.root)
    assert status.json()["running"] is False


def test_a_permission_request_is_answered_from_another_browser(
        web: tuple[Project, Browsing]) -> None:
    project, browsing = web
    phone, desk = browsing.open(viewport=PHONE), browsing.open()
    start_session(desk, "RUN: echo yes > yes.txt\nRUN: echo no > no.txt", "hooked", "ask")
    for page in (phone, desk):
        card = page.get_by_role("article", name="Permission request: Bash")
        expect(card).to_have_count(1)
        expect(card).to_contain_text("echo yes > yes.txt")
        expect(card).to_contain_text("hooked asks to use Bash")
    phone.get_by_role("article", name="Permission request: Bash") \
        .get_by_role("button", name="Approve").click()
    until((project.root / "yes.txt").exists, phone, "the approved tool run")
    # the second request: denied from the desk with a message
    second = desk.get_by_role("article", name="Permission request: Bash")
    expect(second).to_contain_text("echo no > no.txt")
    expect(phone.get_by_role("article")).to_contain_text("echo no > no.txt")
    # the message is the reason, whatever it says: "Yes" with Deny denies
    second.get_by_label("Message (optional)").fill("Yes")
    second.get_by_role("button", name="Deny").click()
    for page in (phone, desk):
        expect(page.get_by_role("article")).to_have_count(0)
        expect(page.get_by_role("region", name="Permission requests")).to_be_hidden()
    transcript = region(desk, "Transcript")
    expect(transcript).to_contain_text("ran: echo yes > yes.txt")
    expect(transcript).to_contain_text("denied: denied by remote (Ralph): Yes")
    expect(transcript).to_contain_text("completed")
    assert not (project.root / "no.txt").exists()
    sessions = region(phone, "Sessions")
    expect(sessions.get_by_role("listitem").first).to_contain_text("RUN: echo yes")
    expect(sessions.get_by_role("listitem").first).to_contain_text("completed")


def test_a_page_opened_while_an_agent_waits_shows_its_request(
        web: tuple[Project, Browsing]) -> None:
    project, browsing = web
    first = browsing.open()
    start_session(first, "RUN: echo later > later.txt", "hooked", "ask")
    expect(first.get_by_role("article")).to_have_count(1)
    late = browsing.open()  # agent/pending: the request made before it opened
    card = late.get_by_role("article", name="Permission request: Bash")
    expect(card).to_contain_text("echo later > later.txt")
    late.get_by_role("button", name="Stop session").click()
    for page in (first, late):
        expect(page.get_by_role("article")).to_have_count(0)
    assert not (project.root / "later.txt").exists()


def test_sessions_notes_and_changes_are_live_on_every_client(
        web: tuple[Project, Browsing]) -> None:
    project, browsing = web
    one, two = browsing.open(), browsing.open()
    start_session(one, "say hello", "echo")
    # the whole transcript, its start too (which came before the page asked for it)
    expect(one.locator("#transcript")).to_contain_text("> say hello")
    expect(one.locator("#transcript")).to_contain_text("finished")
    expect(one.locator("#transcript")).to_contain_text("── completed ──")
    listed = region(two, "Sessions").get_by_role("listitem").first
    expect(listed).to_contain_text("say hello")
    listed.get_by_role("button", name="say hello").click()
    # a page open before the session started: its events since, after the history
    expect(two.locator("#transcript")).to_contain_text("> say hello")
    expect(two.locator("#transcript")).to_contain_text("── completed ──")
    text = str(two.locator("#transcript").text_content())
    assert text.count("> say hello") == 1 and text.count("── completed ──") == 1, text
    late = browsing.open()  # a page opened after it: its history only
    region(late, "Sessions").get_by_role("button", name="say hello").click()
    expect(late.locator("#transcript")).to_have_text(text)
    # a double click, and another session picked and this one again at once: one transcript
    region(late, "Sessions").get_by_role("button", name="say hello").dblclick()
    late.evaluate("""() => { const s = window.ralph.sessions, id = s.sessions[0].session_id;
        s.watch(id); s.watch('nobody'); s.watch(id); }""")
    late.wait_for_timeout(1000)
    expect(late.locator("#transcript")).to_have_text(text)

    one.get_by_label("Note", exact=True).fill("remember the milk")
    one.get_by_label("Type", exact=True).select_option("learning")
    one.get_by_role("button", name="Add note").click()
    for page in (one, two):
        expect(region(page, "Notes").get_by_role("listitem").first) \
            .to_contain_text("remember the milk")
    assert run_ralph("notes", "add", "--type", "blocked", "from the terminal",
                     cwd=project.root).code == 0
    for page in (one, two):
        notes = region(page, "Notes").get_by_role("listitem")
        expect(notes.first).to_contain_text("from the terminal")
        expect(notes).to_have_count(2)  # each once
    two.get_by_label("Show notes of type").select_option("learning")
    expect(region(two, "Notes").get_by_role("listitem")).to_have_count(1)

    (project.root / "hello.txt").write_text("hello world\n")
    (project.root / "PRD.md").write_text(project.read_prd() + "- [ ] 4. Fourth task\n")
    for page in (one, two):
        changes = region(page, "Changes")
        expect(changes.get_by_role("listitem").filter(has_text="hello.txt")) \
            .to_contain_text("created")
        expect(changes.get_by_text("Untracked:")).to_be_visible()
    region(two, "Changes").get_by_role("button", name="Not staged PRD.md").click()
    diff = region(two, "Diff")
    expect(diff).to_contain_text("+- [ ] 4. Fourth task")
    expect(diff.locator(".add")).to_have_count(1)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_reconnect_catches_up_without_duplicates(project: Project,
                                                   browsing: Browsing) -> None:
    configure(project, {"default": {"print": ["caught up line"], "tick": True}})
    port = str(free_port())
    with serving(project.root, "--port", port) as served:
        browsing.served = served
        page = browsing.open()
        run_ralph("notes", "add", "--type", "remaining", "before", cwd=project.root)
        expect(region(page, "Notes").get_by_role("listitem").first).to_contain_text("before")
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(TIMEOUT) == 0
    status = page.get_by_role("status", name="Connection")
    expect(status).to_contain_text("Reconnecting")
    # while the page is away: an iteration, and a note
    step = run_ralph("step", cwd=project.root)
    assert step.code == 0, step.err
    run_ralph("notes", "add", "--type", "completed", "while away", cwd=project.root)
    with serving(project.root, "--port", port):
        expect(status).to_have_text("Connected")
        live = region(page, "Live output")
        expect(live).to_contain_text("caught up line")
        expect(region(page, "Iterations").get_by_role("listitem")).to_have_count(1)
        notes = region(page, "Notes").get_by_role("listitem")
        expect(notes).to_have_count(2)
        expect(notes.first).to_contain_text("while away")
        expect(page.get_by_role("progressbar")).to_have_attribute("aria-valuenow", "1")
        page.wait_for_timeout(1000)  # anything sent twice would be here by now
        assert output_text(page).count("caught up line") == 1
        assert output_text(page).count("iteration 1 finished") == 1
        with Store(project.root / ".ralph" / "store") as store:
            last = store.last_seq
        assert page.evaluate("window.ralph.rpc.lastSeq") == last


def test_phone_width_dark_mode_and_nothing_from_elsewhere(
        web: tuple[Project, Browsing]) -> None:
    _, browsing = web
    assert browsing.served is not None
    requested: list[str] = []
    page = browsing.open(viewport=PHONE, color_scheme="dark", is_mobile=True, has_touch=True,
                         before=lambda page: page.on("request",
                                                     lambda r: requested.append(r.url)))
    for name in REGIONS:
        section = region(page, name)
        section.scroll_into_view_if_needed()
        expect(section).to_be_visible()
        box = section.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    for name in BUTTONS:
        expect(page.get_by_role("button", name=name, exact=True)).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    red, green, blue = (int(v) for v in re.findall(r"\d+", background)[:3])
    assert red + green + blue < 120, background  # dark
    assert requested and all(url.startswith((browsing.served.http, "ws://127.0.0.1"))
                             for url in requested), requested


def test_the_history_pages_and_the_live_view_is_bounded(project: Project,
                                                        browsing: Browsing) -> None:
    configure(project, {"default": {"print": ["x"]}})
    with Store(project.root / ".ralph" / "store") as store:
        record_history(store, 60, 3)
    with serving(project.root) as served:
        browsing.served = served
        asked: list[str] = []
        page = browsing.open(before=lambda page: page.on("websocket", lambda ws: ws.on(
            "framesent", lambda payload: asked.append(str(payload)))))
        rows = region(page, "Iterations").get_by_role("listitem")
        expect(rows).to_have_count(25)
        expect(rows.first).to_contain_text("#60")
        expect(page.locator("#iterations-total")).to_have_text("25 of 60 shown")
        older = page.get_by_role("button", name="Load older iterations")
        older.click()
        expect(rows).to_have_count(50)
        older.click()
        expect(rows).to_have_count(60)
        expect(rows.last).to_contain_text("#1 ")
        expect(older).to_be_hidden()
        pages = [frame for frame in asked if "loop/iterations" in frame]
        assert len(pages) == 3 and all('"limit":25' in frame for frame in pages), pages
        page.evaluate("""() => { for (let i = 0; i < 2000; i++)
            window.ralph.event('event/loop_agent_output',
                {kind: 'text', content: 'line ' + i, iteration: 1, runId: 'r'}); }""")
        expect(page.locator("#output span")).to_have_count(500)
        expect(page.locator("#output span").last).to_have_text("line 1999\n")



def test_a_session_is_continued_and_a_refused_command_is_said(
        web: tuple[Project, Browsing]) -> None:
    project, browsing = web
    page = browsing.open()
    start_session(page, "RUN: echo one > one.txt", "hooked")
    transcript = region(page, "Transcript")
    expect(transcript).to_contain_text("ran: echo one > one.txt")
    first = region(page, "Sessions").get_by_role("listitem").first
    expect(first).to_contain_text("completed")
    page.get_by_label("Prompt").fill("RUN: echo two > two.txt")
    page.get_by_role("button", name="Continue session").click()
    expect(transcript).to_contain_text("ran: echo two > two.txt")
    sessions = region(page, "Sessions").get_by_role("listitem")
    expect(sessions).to_have_count(2)
    expect(sessions.first).to_contain_text("RUN: echo two")
    assert (project.root / "two.txt").exists()

    (project.root / "PRD.md").write_text(project.read_prd().replace("[ ]", "[x]"))
    project.commit("every task done")
    page.reload()
    ready(page)
    expect(page.locator("#progress-text")).to_have_text("3/3 done")
    page.get_by_role("button", name="Step", exact=True).click()
    refused = region(page, "Loop").get_by_role("alert")
    expect(refused).to_contain_text(re.compile(r"^step: .+"))
    expect(page.locator("#loop-state")).to_have_text("idle")


def test_live_events_that_overtake_a_slow_catch_up_are_not_lost(project: Project,
                                                                 browsing: Browsing) -> None:
    """A reconnect whose `initialize` reaches the server late (a slow network): the server
    sends live events after a second without waiting for it, before the replay of what
    was missed; the page orders them and shows each."""
    configure(project, {"default": {"print": ["said by the agent"], "tick": True}})
    port = str(free_port())
    held: list[str] = []
    hold = {"initialize": False}
    routes: list[WebSocketRoute] = []

    def route(ws: WebSocketRoute) -> None:
        server = ws.connect_to_server()

        def to_server(message: str | bytes) -> None:
            if hold["initialize"] and '"initialize"' in str(message):
                hold["initialize"] = False
                held.append(str(message))
            else:
                server.send(message)

        ws.on_message(to_server)
        server.on_message(ws.send)
        routes.append(server)

    with serving(project.root, "--port", port) as served:
        browsing.served = served
        page = browsing.open(before=lambda page: page.route_web_socket(
            re.compile(r".*/ws\b.*"), route))
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(TIMEOUT) == 0
    status = page.get_by_role("status", name="Connection")
    expect(status).to_contain_text("Reconnecting")
    assert run_ralph("step", cwd=project.root).code == 0  # missed: replayed
    hold["initialize"] = True
    with serving(project.root, "--port", port):
        until(lambda: bool(held), page, "a reconnect")  # its initialize held back
        # live, sent once the server's hold of a new connection's events is over
        assert run_ralph("step", cwd=project.root).code == 0
        page.wait_for_timeout(500)
        routes[-1].send(held[0])
        expect(status).to_have_text("Connected")
        expect(region(page, "Live output")).to_contain_text("working on task 2")
        page.wait_for_timeout(500)
        text = output_text(page)
        assert text.count("working on task 1") == 1 and text.count("working on task 2") == 1
        assert text.index("working on task 1") < text.index("working on task 2"), text


def test_a_wake_up_while_the_token_is_checked_opens_one_socket(project: Project,
                                                                browsing: Browsing) -> None:
    """The page is told the network is back while it asks the server why its last try
    failed (a refused token, or the server away): the try it makes then is the only one."""
    configure(project, {"default": {"print": ["said once"], "tick": True}})
    port = str(free_port())
    sockets: list[WebSocket] = []
    probes: list[Route] = []
    with serving(project.root, "--port", port) as served:
        browsing.served = served
        # (Playwright calls Python functions, not built-in methods such as list.append)
        page = browsing.open(before=lambda page: page.on(
            "websocket", lambda ws: sockets.append(ws)))  # noqa: PLW0108
        page.route("**/api/status", lambda route: probes.append(route))  # noqa: PLW0108
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(TIMEOUT) == 0
    until(lambda: bool(probes), page, "a probe of the token")
    with serving(project.root, "--port", port):
        page.evaluate("window.dispatchEvent(new Event('online'))")
        status = page.get_by_role("status", name="Connection")
        expect(status).to_have_text("Connected")
        for probe in probes:  # its answer comes after the new connection: ignored
            probe.continue_()
        page.unroute("**/api/status")
        page.wait_for_timeout(2000)
        assert len([ws for ws in sockets if not ws.is_closed()]) == 1
        assert run_ralph("step", cwd=project.root).code == 0
        expect(region(page, "Live output")).to_contain_text("iteration 1 finished")
        page.wait_for_timeout(500)
        assert output_text(page).count("said once") == 1
        expect(status).to_have_text("Connected")
