// Permission requests: a card per request waiting for an answer, from any running session
// (agent/pending when the page connects, then event/agent_output permission_request).
// Answered anywhere (this page, another client, a terminal), the card goes: the session's
// event/agent_status says so to every client. Requests are keyed by session and
// tool_use_id (two sessions may use the same id).
//
// agent/pending reads the store when it is answered, and events may pass its answer on
// the way: a request answered meanwhile is not shown again, and a card whose request is
// newer than what this page had seen when it asked stays.

import { $, h } from "./dom.js";
import { describeError } from "./connection.js";

export class PermissionsView {
  constructor(app) {
    this.app = app;
    this.cards = new Map(); // key(session, tool_use_id) -> {request, element}
    this.answered = new Set(); // keys answered (or whose session ended)
    this.ended = new Set(); // sessions that ended
  }

  async load() {
    const seen = this.app.rpc.lastSeq ?? 0; // what the answer covers at least
    let result;
    try {
      result = await this.app.rpc.call("agent/pending");
    } catch {
      return;
    }
    const open = new Set(result.requests.map((r) => key(r.session_id, r.tool_use_id)));
    for (const [k, card] of [...this.cards]) {
      if (!open.has(k) && (card.request.seq ?? 0) <= seen) this.remove(k);
    }
    for (const request of result.requests) this.add(request);
  }

  add(request) {
    const k = key(request.session_id, request.tool_use_id);
    if (this.cards.has(k) || this.answered.has(k) || this.ended.has(request.session_id)) return;
    const message = h("input", { type: "text", "aria-label": "Message (optional)",
      placeholder: "Message (optional, sent with a denial)" });
    const error = h("p", { class: "error", role: "alert" });
    const answer = async (allow) => {
      for (const button of card.querySelectorAll("button")) button.disabled = true;
      const text = message.value.trim();
      try {
        // a denial is sent as an error: its message is then the agent's reason, whatever
        // it says (a message "yes" must not allow)
        await this.app.rpc.call("agent/respond", allow
          ? { tool_use_id: request.tool_use_id, session_id: request.session_id, response: "approved" }
          : { tool_use_id: request.tool_use_id, session_id: request.session_id,
            response: text || "denied", is_error: true });
        this.answered.add(k);
        this.remove(k);
      } catch (e) {
        error.textContent = describeError(e);
        for (const button of card.querySelectorAll("button")) button.disabled = false;
      }
    };
    const agent = request.agent_type || this.app.agentOf(request.session_id) || "an agent";
    const card = h("article", { class: "permission", "aria-label": `Permission request: ${request.tool_name}`,
      "data-tool-use-id": request.tool_use_id },
      h("h2", {}, `${agent} asks to use ${request.tool_name}`),
      h("p", { class: "muted" }, `session ${request.session_id}`),
      h("pre", {}, typeof request.input === "string" ? request.input : JSON.stringify(request.input, null, 2)),
      h("div", { class: "row" }, message,
        h("button", { type: "button", onclick: () => answer(true) }, "Approve"),
        h("button", { type: "button", class: "danger", onclick: () => answer(false) }, "Deny")),
      error);
    this.cards.set(k, { request, element: card });
    $("permissions").append(card);
    this.show();
  }

  remove(k) {
    const card = this.cards.get(k);
    if (!card) return;
    card.element.remove();
    this.cards.delete(k);
    this.show();
  }

  show() {
    $("permissions").hidden = this.cards.size === 0;
  }

  event(method, p) {
    if (p.replay) return; // session/watch's history: asked and answered long ago
    if (method === "event/agent_output" && p.type === "permission_request") {
      this.add({ session_id: p.session_id, tool_use_id: p.tool_use_id, tool_name: p.tool_name,
        input: p.input, agent_type: null, seq: p.seq });
    } else if (method === "event/agent_status" && p.tool_use_id && p.state !== "waiting") {
      const k = key(p.session_id, p.tool_use_id);
      this.answered.add(k);
      this.remove(k);
    } else if (method === "event/agent_started") {
      this.ended.delete(p.session_id);
    } else if (method === "event/agent_stopped") {
      this.ended.add(p.session_id);
      for (const [k, card] of [...this.cards]) if (card.request.session_id === p.session_id) this.remove(k);
    }
  }
}

function key(sessionId, toolUseId) {
  return `${sessionId} ${toolUseId}`;
}
