// Small DOM helpers: elements are built with text nodes only (never innerHTML), so that
// nothing an agent writes can become markup.

export function $(id) {
  return document.getElementById(id);
}

/** An element: h("li", {class: "x", "data-state": "ok"}, "text", child, ...). */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (value === true) element.setAttribute(name, "");
    else element.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : String(child));
  }
  return element;
}

export function clear(element) {
  element.replaceChildren();
}

/** A <select> of agents: "default agent" (the server's default), then `names`. */
export function agentChoices(select, names) {
  const chosen = select.value;
  clear(select);
  select.append(h("option", { value: "" }, "default agent"));
  for (const name of names) select.append(h("option", { value: name }, name));
  select.value = names.includes(chosen) ? chosen : "";
}

export function showError(element, text) {
  element.textContent = text || "";
}

export function seconds(value) {
  if (value === null || value === undefined) return "";
  const s = Math.max(0, Math.round(value));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${String(s % 60).padStart(2, "0")} s`;
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, "0")} min`;
}

export function count(n) {
  return typeof n === "number" ? n.toLocaleString("en-US") : "";
}

export function usd(value) {
  if (value === null || value === undefined) return "";
  return `$${value < 0.01 && value > 0 ? value.toFixed(4) : value.toFixed(2)}`;
}

export function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return date.toLocaleString([], { dateStyle: "short", timeStyle: "short" });
}

/** Run `fn` at most once per `ms`, at the end of a burst of calls. */
export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

/**
 * A bounded log in a <pre>: the last `max` lines, each a span of its kind; text that
 * continues a line (an agent streaming) is appended to it. Drawn once per frame.
 */
export class LineLog {
  constructor(element, max) {
    this.element = element;
    this.max = max;
    this.lines = []; // {kind, text, open}
    this.dirty = false;
  }

  add(kind, text, { delta = false } = {}) {
    const pieces = String(text).split("\n");
    const last = this.lines[this.lines.length - 1];
    let first = 0;
    if (delta && last && last.open && last.kind === kind) {
      last.text += pieces[0];
      first = 1;
    }
    for (let i = first; i < pieces.length; i += 1) {
      this.lines.push({ kind, text: pieces[i], open: true });
    }
    if (!delta && this.lines.length) this.lines[this.lines.length - 1].open = false;
    if (this.lines.length > this.max) this.lines.splice(0, this.lines.length - this.max);
    this.draw();
  }

  mark(text) {
    this.add("mark", text);
  }

  reset() {
    this.lines = [];
    this.draw();
  }

  draw() {
    if (this.dirty) return;
    this.dirty = true;
    requestAnimationFrame(() => {
      this.dirty = false;
      const element = this.element;
      const atEnd = element.scrollTop + element.clientHeight >= element.scrollHeight - 8;
      element.replaceChildren(...this.lines.map(
        (line) => h("span", { class: line.kind }, line.text + "\n")));
      if (atEnd) element.scrollTop = element.scrollHeight;
    });
  }
}
