// Changes: the git status, the files changed as the watcher records them
// (event/file_changed), and a file's diff (git/diff) when it is opened.

import { $, clear, h, when } from "./dom.js";
import { describeError } from "./connection.js";

const FILES_SHOWN = 100;
const DIFF_LINES = 5000;

export class ChangesView {
  constructor(app) {
    this.app = app;
    this.files = new Map(); // path -> {change, seq, at}, newest last
    this.gitEnabled = false;
    $("close-diff").addEventListener("click", () => {
      $("diff-box").hidden = true;
    });
  }

  async load(gitEnabled) {
    this.gitEnabled = gitEnabled;
    if (!gitEnabled) {
      const note = $("git-error");
      note.hidden = false;
      note.textContent = "Not the top of a git repository: no git status or diffs.";
      return;
    }
    try {
      this.drawStatus(await this.app.rpc.call("git/status"));
    } catch (error) {
      const note = $("git-error");
      note.hidden = false;
      note.textContent = describeError(error);
    }
  }

  fileButton(path, label) {
    return h("button", { type: "button", class: "link", onclick: () => this.diff(path),
      "aria-label": `${label ? `${label} ` : ""}${path}` }, path);
  }

  drawStatus(status) {
    $("branch").textContent = status.branch ? `on ${status.branch}` : "";
    const box = $("git-status");
    clear(box);
    const groups = [["Staged", status.staged], ["Not staged", status.unstaged],
      ["Untracked", status.untracked]];
    let any = false;
    for (const [label, paths] of groups) {
      if (!paths || !paths.length) continue;
      any = true;
      box.append(h("div", {}, h("span", { class: "meta" }, `${label}: `),
        ...paths.slice(0, FILES_SHOWN).flatMap((p, i) => [i ? ", " : "", this.fileButton(p, label)])));
    }
    if (!any) box.append(h("p", { class: "muted" }, "Working tree clean."));
  }

  drawFiles() {
    const list = $("file-changes");
    clear(list);
    const entries = [...this.files.entries()].reverse();
    for (const [path, change] of entries) {
      list.append(h("li", {},
        h("span", { class: "badge", "data-state": change.change }, change.change),
        this.gitEnabled && change.change !== "deleted" ? this.fileButton(path) : h("span", { class: "title" }, path),
        change.old_path ? h("span", { class: "meta" }, `from ${change.old_path}`) : null,
        h("span", { class: "meta" }, when(change.at))));
    }
    if (!entries.length) list.append(h("li", { class: "muted" }, "No file changed since this page opened."));
  }

  async diff(path) {
    const box = $("diff-box");
    const pre = $("diff");
    box.hidden = false;
    $("diff-title").textContent = `Diff: ${path}`;
    pre.textContent = "…";
    try {
      const result = await this.app.rpc.call("git/diff", { path });
      const lines = result.diff ? result.diff.split("\n") : [];
      clear(pre);
      if (!lines.length) pre.textContent = "No change against HEAD.";
      for (const line of lines.slice(0, DIFF_LINES)) {
        const kind = line.startsWith("+") && !line.startsWith("+++") ? "add"
          : line.startsWith("-") && !line.startsWith("---") ? "del"
            : line.startsWith("@@") ? "hunk" : null;
        pre.append(kind ? h("span", { class: kind }, line) : `${line}\n`);
      }
      if (lines.length > DIFF_LINES || result.truncated) pre.append(h("span", { class: "hunk" }, "… (cut)"));
    } catch (error) {
      pre.textContent = describeError(error);
    }
  }

  event(method, p) {
    if (method === "event/file_changed") {
      this.files.delete(p.path);
      this.files.set(p.path, { change: p.change, old_path: p.old_path, at: new Date().toISOString() });
      while (this.files.size > FILES_SHOWN) this.files.delete(this.files.keys().next().value);
      this.drawFiles();
    } else if (method === "event/git_status_changed") {
      this.drawStatus(p);
    }
  }
}
