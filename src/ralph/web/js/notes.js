// Notes: newest first, of one type or all; adding one (notes/add); event/note_added
// brings the ones any client, agent or terminal adds.

import { $, clear, h, showError, when } from "./dom.js";
import { describeError } from "./connection.js";

export const NOTE_TYPES = ["completed", "in_progress", "blocked", "remaining", "learning", "decision"];
const SHOWN = 50;

export class NotesView {
  constructor(app) {
    this.app = app;
    this.notes = [];
    const filter = $("notes-filter");
    const type = $("note-type");
    for (const name of NOTE_TYPES) {
      filter.append(h("option", { value: name }, name.replace("_", " ")));
      type.append(h("option", { value: name }, name.replace("_", " ")));
    }
    type.value = "remaining";
    filter.addEventListener("change", () => this.load());
    $("note-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.add();
    });
  }

  async load() {
    const type = $("notes-filter").value;
    try {
      const result = await this.app.rpc.call("notes/list", type ? { type, limit: SHOWN } : { limit: SHOWN });
      this.notes = result.notes;
    } catch (error) {
      showError($("note-error"), describeError(error));
      return;
    }
    this.draw();
  }

  draw() {
    const list = $("notes");
    clear(list);
    for (const note of this.notes) {
      list.append(h("li", { "data-note": note.id },
        h("span", { class: "badge", "data-state": note.type }, note.type.replace("_", " ")),
        h("span", { class: "meta" }, `${note.session}${note.iteration ? ` · iteration ${note.iteration}` : ""} · ${when(note.ts)}`),
        h("span", { class: "text" }, note.text)));
    }
    if (!this.notes.length) list.append(h("li", { class: "muted" }, "No notes."));
  }

  async add() {
    const text = $("note-text").value;
    showError($("note-error"), "");
    if (!text.trim()) {
      showError($("note-error"), "Write the note first.");
      return;
    }
    const button = $("add-note");
    button.disabled = true;
    try {
      const note = await this.app.rpc.call("notes/add", { type: $("note-type").value, text });
      $("note-text").value = "";
      this.event("event/note_added", note);
    } catch (error) {
      showError($("note-error"), describeError(error));
    } finally {
      button.disabled = false;
    }
  }

  event(method, note) {
    if (method !== "event/note_added") return;
    const type = $("notes-filter").value;
    if ((type && note.type !== type) || this.notes.some((n) => n.id === note.id)) return;
    this.notes.unshift(note);
    if (this.notes.length > SHOWN) this.notes.length = SHOWN;
    this.draw();
  }
}
