// Ralph's web monitor: a client of `ralph serve`'s WebSocket API and nothing else (no
// private endpoint: whatever this page does, any client can do). The token comes in the
// address (?token=...), is kept in sessionStorage for this tab, and taken out of the
// address bar at once.

import { $ } from "./dom.js";
import { Connection } from "./connection.js";
import { ChangesView } from "./changes.js";
import { LoopView } from "./loop.js";
import { NotesView } from "./notes.js";
import { PermissionsView } from "./permissions.js";
import { SessionsView } from "./sessions.js";

const TOKEN_KEY = "ralph.token";

function takeToken() {
  const query = new URLSearchParams(location.search);
  const given = query.get("token");
  if (given !== null) {
    sessionStorage.setItem(TOKEN_KEY, given);
    query.delete("token");
    const rest = query.toString();
    history.replaceState(null, "", `${location.pathname}${rest ? `?${rest}` : ""}${location.hash}`);
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

class App {
  constructor() {
    this.rpc = null;
    this.status = null;
    this.agentTypes = new Map(); // session_id -> agent, from event/agent_started
    this.loop = new LoopView(this);
    this.sessions = new SessionsView(this);
    this.permissions = new PermissionsView(this);
    this.notes = new NotesView(this);
    this.changes = new ChangesView(this);
    $("token-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const token = $("token-input").value.trim();
      if (!token) return;
      sessionStorage.setItem(TOKEN_KEY, token);
      $("token-input").value = "";
      this.connect(token);
    });
  }

  connect(token) {
    if (this.rpc) this.rpc.stop();
    this.rpc = new Connection({
      token,
      onEvent: (method, params) => this.event(method, params),
      onState: (state, detail) => this.connectionState(state, detail),
      onOpen: (init) => this.opened(init),
    });
    this.rpc.start();
  }

  agentOf(sessionId) {
    const found = this.sessions.sessions.find((s) => s.session_id === sessionId);
    return this.agentTypes.get(sessionId) || (found ? found.agent_type : null);
  }

  connectionState(state, detail) {
    const badge = $("connection");
    badge.dataset.state = state;
    if (state === "connected") badge.textContent = "Connected";
    else if (state === "connecting") badge.textContent = "Connecting…";
    else if (state === "reconnecting") {
      badge.textContent = detail.inSeconds !== undefined
        ? `Reconnecting in ${Math.max(1, Math.round(detail.inSeconds))} s (attempt ${detail.attempt})`
        : `Reconnecting (attempt ${detail.attempt})…`;
    } else if (state === "rejected") badge.textContent = "Token rejected";
    badge.title = detail.reason ? `The last try failed: ${detail.reason}` : "";
    const rejected = state === "rejected";
    $("rejected").hidden = !rejected;
    if (rejected) {
      $("app").hidden = true;
      sessionStorage.removeItem(TOKEN_KEY);
      $("rejected-why").textContent = detail.hadToken
        ? "This server did not accept the token this page was given."
        : "This server needs a token, and this page was given none.";
      $("rejected-url").textContent = `${location.origin}/?token=TOKEN`;
    }
  }

  async opened(init) {
    $("app").hidden = false;
    const agents = (init.capabilities && init.capabilities.supportedAgents) || [];
    let status;
    try {
      status = await this.rpc.call("status/get");
    } catch {
      return;
    }
    this.status = status;
    $("project").textContent = status.repo_name;
    document.title = `Ralph · ${status.repo_name}`;
    this.loop.agents(agents);
    this.sessions.agents(agents);
    const gitEnabled = Boolean(init.capabilities && init.capabilities.git && init.capabilities.git.status);
    await Promise.all([this.loop.load(), this.sessions.load(status), this.permissions.load(),
      this.notes.load(), this.changes.load(gitEnabled)]);
    this.changes.drawFiles();
    if (!performance.getEntriesByName("ralph:ready").length) performance.mark("ralph:ready");
    document.body.dataset.ready = "true";
  }

  event(method, params) {
    if (method.startsWith("event/loop_")) this.loop.event(method, params);
    else if (method.startsWith("event/agent_")) {
      if (method === "event/agent_started") this.agentTypes.set(params.session_id, params.agent_type);
      this.permissions.event(method, params);
      this.sessions.event(method, params);
    } else if (method === "event/note_added") this.notes.event(method, params);
    else if (method === "event/file_changed" || method === "event/git_status_changed") {
      this.changes.event(method, params);
    }
  }
}

const app = new App();
window.ralph = app; // for a person's console
app.connect(takeToken());
window.addEventListener("online", () => app.rpc.reconnectNow());
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible") app.rpc.reconnectNow();
});
