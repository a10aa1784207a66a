// Agent sessions: the list (Ralph's and the agent CLIs' own), one session's transcript,
// starting, continuing and stopping one.
//
// A transcript is the session's history as session/watch replays it (its events up to
// when this page connected), then the events that came since: every session's live events
// reach every client, and the page keeps the recent ones of each session for a transcript
// opened later.

import { $, agentChoices, LineLog, clear, debounce, h, showError, when } from "./dom.js";
import { RpcError, describeError } from "./connection.js";

const TRANSCRIPT_LINES = 1000;
const LIST_LIMIT = 30;
const BUFFERED = 2000; // live events kept per session
const BUFFERED_CHARS = 1000000; // ... and characters of them
const SESSIONS_BUFFERED = 20; // sessions whose live events are kept (the latest active)

export class SessionsView {
  constructor(app) {
    this.app = app;
    this.sessions = [];
    this.selected = null; // the session whose transcript is shown (watched)
    this.seat = null; // the session this server started last (agent/stop stops it)
    this.live = new Map(); // session_id -> running | waiting, from event/agent_status
    this.transcript = new LineLog($("transcript"), TRANSCRIPT_LINES);
    this.buffers = new Map(); // session_id -> {events: [method, params, chars], chars, trimmed}
    this.watching = null; // {id, replayedTo}: the session/watch in flight
    this.wanted = null; // a session to watch once the one in flight is answered
    this.lastLogSeq = null;
    this.refreshSoon = debounce(() => this.refresh(), 200);
    $("session-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.start("new");
    });
    $("continue-session").addEventListener("click", () => this.start("continue"));
    $("stop-session").addEventListener("click", () => this.stop());
    $("refresh-sessions").addEventListener("click", () => this.refresh());
  }

  get rpc() {
    return this.app.rpc;
  }

  agents(names) {
    agentChoices($("session-agent"), names);
  }

  async load(status) {
    this.seat = status.session_id;
    this.live.clear();
    if (this.seat && ["running", "waiting"].includes(status.agent_state)) {
      this.live.set(this.seat, status.agent_state);
    }
    await this.refresh();
    if (this.selected) await this.watch(this.selected); // a reconnect: watch it again
  }

  async refresh() {
    let result;
    try {
      result = await this.rpc.call("session/list", { limit: LIST_LIMIT });
    } catch (error) {
      showError($("session-error"), describeError(error));
      return;
    }
    this.sessions = result.sessions;
    this.draw();
  }

  // running / waiting while the events say so; else what session/list says (completed,
  // stopped, failed, ...), or "its own" for an agent CLI's conversation
  stateOf(sessionId) {
    const listed = this.sessions.find((s) => s.session_id === sessionId);
    return this.live.get(sessionId) || (listed ? listed.status || "its own" : null);
  }

  draw() {
    const list = $("sessions");
    clear(list);
    for (const s of this.sessions) {
      const state = this.stateOf(s.session_id);
      list.append(h("li", { class: s.session_id === this.selected ? "selected" : null,
        "data-session": s.session_id },
        h("span", { class: "badge", "data-state": state }, state),
        h("button", { type: "button", class: "link title", "aria-pressed": String(s.session_id === this.selected),
          onclick: () => this.watch(s.session_id) }, s.summary || s.session_id),
        h("span", { class: "meta" }, `${s.agent_type || ""}${s.kind === "native" ? " (the CLI's own)" : ""}`),
        h("span", { class: "meta" }, when(s.last_updated || s.start_time))));
    }
    if (!this.sessions.length) list.append(h("li", { class: "muted" }, "No agent session yet."));
    const selected = this.sessions.find((s) => s.session_id === this.selected);
    const selectedState = this.selected ? this.stateOf(this.selected) : null;
    $("continue-session").disabled = !selected || selectedState === "running" || selectedState === "waiting";
    const seatState = this.seat ? this.stateOf(this.seat) : null;
    $("stop-session").disabled = !(seatState === "running" || seatState === "waiting");
  }

  // Watches go one at a time (the server answers one per connection at a time, and a
  // replayed event does not say which watch it is for): the latest one asked for is sent
  // when the one in flight is answered, and only the replay of the one still wanted is
  // shown.
  async watch(sessionId) {
    const summary = this.sessions.find((s) => s.session_id === sessionId);
    $("transcript-title").textContent = `Transcript: ${summary ? summary.summary || sessionId : sessionId}`;
    $("transcript-box").hidden = false;
    const again = this.selected === sessionId && this.watching && this.watching.id === sessionId
      && this.wanted === null;
    this.selected = sessionId;
    this.draw();
    if (again) return; // (a double click: that watch is under way)
    this.wanted = sessionId;
    if (this.watching) return; // sent when the one in flight is answered
    while (this.wanted !== null) {
      const watching = { id: this.wanted, replayedTo: 0 };
      this.wanted = null;
      this.watching = watching;
      this.transcript.reset();
      let lost = false;
      try {
        await this.rpc.call("session/watch", { session_id: watching.id });
      } catch (error) {
        lost = error instanceof RpcError && error.code === -1; // (watched again on reconnect)
        if (!lost && this.wanted === null) this.transcript.add("error", describeError(error));
      }
      this.watching = null;
      if (this.wanted === null && !lost) this.catchUp(watching);
    }
  }

  // After a watch's history: the session's events this page has had since (kept).
  catchUp(watching) {
    const kept = this.buffers.get(watching.id);
    if (!kept) return;
    if (kept.trimmed && kept.events.length && kept.events[0][1].seq > watching.replayedTo) {
      this.transcript.mark("… (earlier events not kept by this page: reload it for them)");
    }
    for (const [method, p] of kept.events) {
      if (p.seq > watching.replayedTo) this.render(method, p);
    }
  }

  // The session's live events, for a transcript opened later: the most recently active
  // sessions', bounded in events and characters; never the selected one's dropped.
  keep(sessionId, method, p) {
    let kept = this.buffers.get(sessionId);
    if (kept) this.buffers.delete(sessionId); // (to the end: most recently active)
    else kept = { events: [], chars: 0, trimmed: false };
    this.buffers.set(sessionId, kept);
    const size = String(p.content ?? p.line ?? p.prompt ?? "").length;
    kept.events.push([method, p, size]);
    kept.chars += size;
    while (kept.events.length > BUFFERED || kept.chars > BUFFERED_CHARS) {
      kept.chars -= kept.events.shift()[2];
      kept.trimmed = true;
    }
    for (const id of this.buffers.keys()) {
      if (this.buffers.size <= SESSIONS_BUFFERED) break;
      if (id !== this.selected) this.buffers.delete(id);
    }
  }

  async start(mode) {
    const prompt = $("session-prompt").value.trim();
    showError($("session-error"), "");
    if (!prompt) {
      showError($("session-error"), "Write a prompt first.");
      return;
    }
    const params = { prompt, approvals: $("session-approvals").value, mode };
    const agent = $("session-agent").value;
    if (agent) params.agent_type = agent;
    if (mode === "continue") params.session_id = this.selected;
    const button = mode === "continue" ? $("continue-session") : $("start-session");
    button.disabled = true;
    try {
      const result = await this.rpc.call("agent/run", params);
      this.seat = result.session_id;
      this.live.set(result.session_id, "running");
      $("session-prompt").value = "";
      await this.refresh();
      await this.watch(result.session_id);
    } catch (error) {
      showError($("session-error"), describeError(error));
    } finally {
      button.disabled = false;
      this.draw();
    }
  }

  async stop() {
    showError($("session-error"), "");
    try {
      await this.rpc.call("agent/stop");
    } catch (error) {
      showError($("session-error"), describeError(error));
    }
  }

  event(method, p) {
    const id = p.session_id;
    if (method === "event/agent_status") {
      if (p.replay) return; // (the state then, not now)
      if (p.state === "running" || p.state === "waiting") this.live.set(id, p.state);
      else this.live.delete(id);
      this.draw();
      return;
    }
    if (p.replay) { // the history of the watch in flight: shown if it is still wanted
      if (this.watching && this.watching.id === id && this.wanted === null) {
        this.watching.replayedTo = Math.max(this.watching.replayedTo, p.seq ?? 0);
        this.render(method, p);
      }
      return;
    }
    if (method === "event/agent_started" || method === "event/agent_stopped") this.refreshSoon();
    if (p.seq !== undefined) this.keep(id, method, p);
    if (id !== this.selected) return;
    // while a watch of it is under way, its history comes first: these are shown after it
    const pending = (this.watching && this.watching.id === id) || this.wanted === id;
    if (pending && p.seq !== undefined) return;
    this.render(method, p);
  }

  render(method, p) {
    const log = this.transcript;
    switch (method) {
      case "event/agent_started":
        log.add("mark", `> ${p.prompt}`);
        break;
      case "event/agent_output":
        if (p.type === "error" && p.seq !== undefined && p.seq === this.lastLogSeq) {
          break; // a stderr line that is an error: shown as its agent_log already
        }
        if (p.type === "permission_request") {
          log.add("tool_use", `? ${p.tool_name} asks for permission: ${JSON.stringify(p.input)}`);
        } else if (p.type === "tool_use" || p.type === "tool_result") {
          log.add(p.type, `${p.type === "tool_use" ? "▸" : "◂"} ${p.tool_name ? `${p.tool_name}: ` : ""}${p.content}`);
        } else {
          log.add(p.type, p.content, { delta: Boolean(p.delta) });
        }
        break;
      case "event/agent_log":
        this.lastLogSeq = p.seq;
        log.add("stderr", p.line);
        break;
      case "event/agent_message":
        // a Ralph session's final answer repeats its streamed text; a CLI's own
        // conversation (no seq) is made of these messages only
        if (p.seq === undefined) log.add(p.role === "user" ? "mark" : "text", `${p.role === "user" ? "> " : ""}${p.content}`);
        break;
      case "event/agent_stopped":
        log.mark(`── ${p.reason}${p.message ? `: ${p.message}` : ""} ──`);
        break;
      default:
    }
  }
}
