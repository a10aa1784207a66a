// Permission requests: a card per request waiting for an answer, from any running session
// (agent/pending when the page connects, then event/agent_output permission_request).
// Answered anywhere (this page, another client, a terminal), the card goes: the session's
// event/agent_status says so to every client.

import { $, h } from "./dom.js";
import { describeError } from "./connection.js";

export class PermissionsView {
  constructor(app) {
    this.app = app;
    this.cards = new Map(); // tool_use_id -> {request, element}
  }

  async load() {
    let result;
    try {
      result = await this.app.rpc.call("agent/pending");
    } catch {
      return;
    }
    const open = new Set(result.requests.map((r) => r.tool_use_id));
    for (const id of [...this.cards.keys()]) if (!open.has(id)) this.remove(id);
    for (const request of result.requests) this.add(request);
  }

  add(request) {
    if (this.cards.has(request.tool_use_id)) return;
    const message = h("input", { type: "text", "aria-label": "Message (optional)",
      placeholder: "Message (optional, sent with a denial)" });
    const error = h("p", { class: "error", role: "alert" });
    const answer = async (allow) => {
      for (const button of card.querySelectorAll("button")) button.disabled = true;
      const text = message.value.trim();
      try {
        await this.app.rpc.call("agent/respond", { tool_use_id: request.tool_use_id,
          session_id: request.session_id, response: allow ? "approved" : text || "denied" });
        this.remove(request.tool_use_id);
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
    this.cards.set(request.tool_use_id, { request, element: card });
    $("permissions").append(card);
    this.show();
  }

  remove(toolUseId) {
    const card = this.cards.get(toolUseId);
    if (!card) return;
    card.element.remove();
    this.cards.delete(toolUseId);
    this.show();
  }

  show() {
    $("permissions").hidden = this.cards.size === 0;
  }

  event(method, p) {
    if (method === "event/agent_output" && p.type === "permission_request" && !p.replay) {
      this.add({ session_id: p.session_id, tool_use_id: p.tool_use_id, tool_name: p.tool_name,
        input: p.input, agent_type: null });
    } else if (method === "event/agent_status" && p.tool_use_id && p.state !== "waiting") {
      this.remove(p.tool_use_id);
    } else if (method === "event/agent_stopped") {
      for (const [id, card] of [...this.cards]) if (card.request.session_id === p.session_id) this.remove(id);
    }
  }
}
