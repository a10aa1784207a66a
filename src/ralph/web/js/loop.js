// The loop: its state and progress, the controls, the current iteration and its live
// output, the tasks, and the iteration history (a page at a time through loop/iterations).

import { $, agentChoices, LineLog, clear, count, debounce, h, seconds, showError, usd } from "./dom.js";
import { RpcError, describeError } from "./connection.js";

const OUTPUT_LINES = 500; // the live view keeps this many lines
const PAGE = 25; // iterations per page

export class LoopView {
  constructor(app) {
    this.app = app;
    this.status = null;
    this.current = null;
    this.iterations = []; // loaded, newest first
    this.nextBefore = null;
    this.output = new LineLog($("output"), OUTPUT_LINES);
    this.refreshSoon = debounce(() => this.refresh(), 150);
    for (const [id, action] of [["run", () => this.run()], ["step", () => this.step()],
      ["pause", () => this.command("loop/pause")], ["resume", () => this.command("loop/resume")],
      ["stop", () => this.command("loop/stop")]]) {
      $(id).addEventListener("click", action);
    }
    $("older").addEventListener("click", () => this.older());
    $("clear-output").addEventListener("click", () => this.output.reset());
    setInterval(() => this.tick(), 1000);
  }

  get rpc() {
    return this.app.rpc;
  }

  agents(names) {
    agentChoices($("loop-agent"), names);
  }

  async refresh() {
    await Promise.all([this.refreshStatus(), this.refreshTasks(), this.refreshHead()]);
  }

  async load() {
    this.iterations = [];
    this.nextBefore = null;
    await Promise.all([this.refreshStatus(), this.refreshTasks(), this.refreshHead(),
      this.refreshCurrent()]);
  }

  async refreshStatus() {
    try {
      this.status = await this.rpc.call("loop/status");
    } catch (error) {
      showError($("loop-error"), describeError(error));
      return;
    }
    this.drawStatus();
  }

  async refreshCurrent() {
    try {
      const { iteration } = await this.rpc.call("loop/current");
      if (iteration) this.current = iteration;
      else if (this.status && !this.status.running) this.current = null;
    } catch (error) {
      return;
    }
    this.drawCurrent();
  }

  drawStatus() {
    const s = this.status;
    const state = s.paused ? "paused" : s.running ? "running" : "idle";
    const badge = $("loop-state");
    badge.textContent = state;
    badge.dataset.state = state;
    const bar = $("progress");
    bar.setAttribute("aria-valuenow", String(s.done));
    bar.setAttribute("aria-valuemax", String(s.total));
    bar.setAttribute("aria-valuetext", `${s.done} of ${s.total} tasks done`);
    bar.firstElementChild.style.width = s.total ? `${(100 * s.done) / s.total}%` : "0";
    $("progress-text").textContent = `${s.done}/${s.total} done`;
    const prdError = $("prd-error");
    prdError.hidden = !s.prd_error;
    prdError.textContent = s.prd_error ? `The PRD cannot be read: ${s.prd_error}` : "";
    $("run").disabled = s.running;
    $("step").disabled = s.running;
    $("pause").disabled = !s.running || s.paused;
    $("resume").disabled = !s.paused;
    $("stop").disabled = !s.running;
    $("next-task").textContent = s.next && !s.running ? `Next: ${s.next.title} (task ${s.next.task_id})`
      : s.total && s.done === s.total ? "Every task is done." : "";
    $("totals").textContent = totals(s.cost);
    if (!s.running && this.current) {
      this.current = null;
      this.drawCurrent();
    }
  }

  drawCurrent() {
    const c = this.current;
    $("current").hidden = !c;
    if (!c) return;
    $("current-iteration").textContent = `#${c.iteration}`;
    $("current-task").textContent = c.title ? `${c.title} (${c.task_id})` : c.task_id || "";
    $("current-agent").textContent = c.agent;
    this.tick();
  }

  tick() {
    if (!this.current || !this.current.ts) return;
    $("current-elapsed").textContent = seconds((Date.now() - Date.parse(this.current.ts)) / 1000);
  }

  async refreshTasks() {
    let list;
    try {
      list = await this.rpc.call("tasks/list");
    } catch (error) {
      const list = $("tasks");
      clear(list);
      list.append(h("li", { class: "warning" }, describeError(error)));
      return;
    }
    const rows = $("tasks");
    clear(rows);
    for (const task of list.tasks) {
      rows.append(h("li", { class: task.next ? "next" : null, "data-task": task.id },
        h("span", { class: "badge", "data-state": task.status }, task.status.replace("_", " ")),
        h("span", { class: "title" }, `${task.id}. ${task.title}`),
        h("span", { class: "meta" }, task.attempts ? `${task.attempts} attempt${task.attempts > 1 ? "s" : ""}` : ""),
        task.next ? h("span", { class: "meta" }, "next") : null,
        task.blocked_reason ? h("span", { class: "reason" }, `Blocked: ${task.blocked_reason}`) : null));
    }
    const done = list.tasks.filter((t) => t.status === "done").length;
    $("tasks-count").textContent = `${done}/${list.tasks.length} done`;
    const warnings = $("tasks-warnings");
    clear(warnings);
    for (const w of list.warnings || []) warnings.append(h("li", {}, `line ${w.line}: ${w.reason}`));
  }

  // The newest page, merged in front of what is loaded (older pages stay).
  async refreshHead() {
    let page;
    try {
      page = await this.rpc.call("loop/iterations", { limit: PAGE });
    } catch (error) {
      return;
    }
    const newest = this.iterations.length ? this.iterations[0].seq : -1;
    const fresh = page.iterations.filter((it) => it.seq > newest);
    if (!this.iterations.length) this.nextBefore = page.next_before;
    this.iterations = [...fresh, ...this.iterations];
    this.total = page.total;
    this.drawIterations();
  }

  async older() {
    if (this.nextBefore === null) return;
    const button = $("older");
    button.disabled = true;
    try {
      const page = await this.rpc.call("loop/iterations",
        { before: this.nextBefore, limit: PAGE });
      const oldest = this.iterations.length ? this.iterations[this.iterations.length - 1].seq : Infinity;
      this.iterations.push(...page.iterations.filter((it) => it.seq < oldest));
      this.nextBefore = page.next_before;
      this.total = page.total;
      this.drawIterations();
    } catch (error) {
      showError($("loop-error"), describeError(error));
    } finally {
      button.disabled = false;
    }
  }

  drawIterations() {
    const list = $("iterations");
    clear(list);
    for (const it of this.iterations) list.append(iterationRow(it));
    $("iterations-total").textContent = `${count(this.iterations.length)} of ${count(this.total)} shown`;
    $("older").hidden = this.nextBefore === null;
  }

  async run() {
    const agent = $("loop-agent").value || undefined;
    await this.command("loop/run", agent ? { agent } : {});
  }

  async step() {
    const agent = $("loop-agent").value || undefined;
    $("step").disabled = true;
    $("run").disabled = true;
    // answered when the iteration ends, however long the agent takes
    await this.command("loop/step", agent ? { agent } : {}, { timeoutMs: 0 });
  }

  async command(method, params, options) {
    showError($("loop-error"), "");
    try {
      await this.rpc.call(method, params, options);
    } catch (error) {
      const lost = error instanceof RpcError && error.code === -1 && method === "loop/step";
      showError($("loop-error"), lost
        ? "step: the connection was lost; the step goes on on the server (its events follow)"
        : `${method.replace("loop/", "")}: ${describeError(error)}`);
    }
    this.refreshSoon();
  }

  event(method, p) {
    switch (method) {
      case "event/loop_run_started":
        this.output.mark(`── run ${p.runId} started (${p.agent}) ──`);
        this.refreshSoon();
        break;
      case "event/loop_iteration_started":
        this.current = p;
        this.drawCurrent();
        this.output.mark(`── iteration ${p.iteration}: ${p.title || p.task_id || ""} (${p.agent}) ──`);
        this.refreshSoon();
        break;
      case "event/loop_agent_output": {
        const kind = p.stream === "stderr" ? "stderr" : p.kind;
        const who = p.role ? `[${p.role}] ` : "";
        const text = p.kind === "tool_use" || p.kind === "tool_result" ? `${who}${p.kind === "tool_use" ? "▸ " : "◂ "}${p.content}` : `${p.delta ? "" : who}${p.content}`;
        this.output.add(kind, text, { delta: Boolean(p.delta) });
        break;
      }
      case "event/loop_iteration_finished":
        this.output.mark(`── iteration ${p.iteration} finished in ${seconds(p.durationSeconds)}${p.gatesOk === false ? " (gates failed)" : ""} ──`);
        if (this.current && this.current.iteration === p.iteration) {
          this.current = null;
          this.drawCurrent();
        }
        this.refreshSoon();
        break;
      case "event/loop_task_blocked":
        this.output.mark(`── task ${p.task_id} blocked: ${p.reason} ──`);
        this.refreshSoon();
        break;
      case "event/loop_run_paused":
      case "event/loop_run_resumed":
        this.refreshSoon();
        break;
      case "event/loop_run_stopped":
        this.output.mark(`── run stopped: ${p.reason}${p.message ? ` (${p.message})` : ""} ──`);
        this.refreshSoon();
        break;
      case "event/loop_error":
        this.output.add("error", `loop error: ${p.message}`);
        this.refreshSoon();
        break;
      default:
    }
  }
}

function totals(cost) {
  if (!cost) return "";
  const part = (label, spend) => {
    if (!spend) return null;
    const t = spend.total || {};
    const tokens = (t.tokens_in || 0) + (t.tokens_out || 0);
    return `${label}: ${count(spend.iterations || 0)} iterations, ${count(tokens)} tokens${t.cost_usd !== null && t.cost_usd !== undefined ? `, ${usd(t.cost_usd)}` : ""}`;
  };
  return [part("Last run", cost.last_run), part("All runs", cost.all_runs)].filter(Boolean).join(" · ");
}

function iterationRow(it) {
  const verdict = it.verified ? "verified" : it.status || "unknown";
  const gates = [["gates", it.gatesOk], ["judge", it.judgeOk], ["review", it.reviewOk]]
    .filter(([, ok]) => ok !== null && ok !== undefined)
    .map(([name, ok]) => `${name} ${ok ? "ok" : "failed"}`).join(", ");
  const tokens = it.tokensIn !== null && it.tokensIn !== undefined
    ? `${count(it.tokensIn)} in / ${count(it.tokensOut || 0)} out tokens` : "";
  return h("li", { "data-seq": it.seq },
    h("span", { class: "badge", "data-state": it.verified ? "done" : it.status }, verdict),
    h("span", { class: "title" }, `#${it.iteration} ${it.title || it.task_id || ""}`),
    h("span", { class: "meta" }, it.agent),
    gates ? h("span", { class: "meta" }, gates) : null,
    h("span", { class: "meta" }, seconds(it.durationSeconds)),
    tokens ? h("span", { class: "meta" }, tokens) : null,
    it.costUsd !== null && it.costUsd !== undefined ? h("span", { class: "meta" }, usd(it.costUsd)) : null,
    it.commit ? h("code", { class: "meta", title: it.commit }, it.commit.slice(0, 8)) : null,
    it.reason ? h("span", { class: "reason" }, it.reason) : null);
}
