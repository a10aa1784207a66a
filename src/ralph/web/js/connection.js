// The page's one WebSocket to `ralph serve`: JSON-RPC 2.0 calls, the server's events, and
// reconnecting with back-off. A reconnect sends `initialize {since_seq}` with the highest
// `seq` seen, so the server replays exactly what was missed (docs/protocols/remote.md,
// "Reconnecting"); events at or below what was seen are dropped all the same.

const BACKOFF_S = [0.5, 1, 2, 4, 8, 15];
const CALL_TIMEOUT_MS = 120000;

export class RpcError extends Error {
  constructor(code, message, data) {
    super(message);
    this.code = code;
    this.data = data;
  }
}

export class Connection {
  /**
   * @param {object} o
   * @param {string|null} o.token
   * @param {(method: string, params: object) => void} o.onEvent
   * @param {(state: string, detail: object) => void} o.onState
   * @param {(init: object, again: boolean) => void} o.onOpen
   */
  constructor({ token, onEvent, onState, onOpen }) {
    this.token = token;
    this.onEvent = onEvent;
    this.onState = onState;
    this.onOpen = onOpen;
    this.ws = null;
    this.nextId = 1;
    this.pending = new Map();
    this.lastSeq = null; // the highest seq seen (where a reconnect resumes)
    this.attempt = 0;
    this.opened = 0; // connections that got as far as initialize's answer
    this.timer = null;
    this.closedForGood = false;
  }

  url() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const query = this.token ? `?token=${encodeURIComponent(this.token)}` : "";
    return `${scheme}//${location.host}/ws${query}`;
  }

  start() {
    this.closedForGood = false;
    clearTimeout(this.timer);
    this.onState(this.opened ? "reconnecting" : "connecting", { attempt: this.attempt });
    let ws;
    try {
      ws = new WebSocket(this.url());
    } catch (error) {
      this.retry();
      return;
    }
    this.ws = ws;
    let upgraded = false;
    ws.onopen = () => {
      upgraded = true;
      const params = { protocolVersion: "1.0",
                       clientInfo: { name: "ralph-web", version: "1" } };
      if (this.lastSeq !== null) params.since_seq = this.lastSeq;
      this.call("initialize", params).then((init) => {
        if (typeof init.last_seq === "number") {
          this.lastSeq = Math.max(this.lastSeq ?? 0, init.last_seq);
        }
        const again = this.opened > 0;
        this.opened += 1;
        this.attempt = 0;
        this.onState("connected", { replayed: init.replayed || 0 });
        this.onOpen(init, again);
      }, () => ws.close());
    };
    ws.onmessage = (message) => this.receive(message.data);
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      for (const { reject, timer } of this.pending.values()) {
        clearTimeout(timer);
        reject(new RpcError(-1, "the connection was lost"));
      }
      this.pending.clear();
      if (this.closedForGood) return;
      if (!upgraded) this.probe();
      else this.retry();
    };
  }

  // A refused upgrade says nothing in a browser: ask over HTTP whether the token is wrong.
  probe() {
    const headers = this.token ? { Authorization: `Bearer ${this.token}` } : {};
    fetch("/api/status", { headers, cache: "no-store" }).then((response) => {
      if (response.status === 401) {
        this.closedForGood = true;
        this.onState("rejected", { hadToken: Boolean(this.token) });
      } else {
        this.retry();
      }
    }, () => this.retry());
  }

  retry() {
    const base = BACKOFF_S[Math.min(this.attempt, BACKOFF_S.length - 1)];
    const delay = base * (0.8 + Math.random() * 0.4);
    this.attempt += 1;
    this.onState("reconnecting", { attempt: this.attempt, inSeconds: delay });
    this.timer = setTimeout(() => this.start(), delay * 1000);
  }

  reconnectNow() {
    clearTimeout(this.timer);
    if (this.ws) this.ws.close();
    else this.start();
  }

  receive(text) {
    let message;
    try {
      message = JSON.parse(text);
    } catch {
      return;
    }
    const messages = Array.isArray(message) ? message : [message];
    for (const one of messages) {
      if (one.id !== undefined && one.id !== null && this.pending.has(one.id)) {
        const { resolve, reject, timer } = this.pending.get(one.id);
        this.pending.delete(one.id);
        clearTimeout(timer);
        if (one.error) reject(new RpcError(one.error.code, one.error.message, one.error.data));
        else resolve(one.result);
      } else if (typeof one.method === "string") {
        this.event(one.method, one.params || {});
      }
    }
  }

  event(method, params) {
    const seq = params.seq;
    if (typeof seq === "number" && !params.replay) {
      // several events may share one frame's seq: only an older one is a repeat
      if (this.lastSeq !== null && seq < this.lastSeq) return;
      this.lastSeq = Math.max(this.lastSeq ?? 0, seq);
    }
    try {
      this.onEvent(method, params);
    } catch (error) {
      console.error("ralph: an event could not be shown", method, error);
    }
  }

  call(method, params) {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) {
      return Promise.reject(new RpcError(-1, "not connected to the server"));
    }
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new RpcError(-1, `${method}: no answer in ${CALL_TIMEOUT_MS / 1000} s`));
      }, CALL_TIMEOUT_MS);
      this.pending.set(id, { resolve, reject, timer });
      const request = { jsonrpc: "2.0", id, method };
      if (params !== undefined) request.params = params;
      ws.send(JSON.stringify(request));
    });
  }
}

/** One line about a failed call: its message and what its data says. */
export function describeError(error) {
  if (!(error instanceof RpcError)) return String(error && error.message ? error.message : error);
  const data = error.data;
  let detail = "";
  if (data && typeof data === "object" && !Array.isArray(data)) {
    // (a loop error's data.error names its kind only: its message says it all)
    detail = data.reason || data.message || "";
    if (!detail && data.retry_after) detail = `try again in ${Math.ceil(data.retry_after)} s`;
    if (typeof detail !== "string") detail = JSON.stringify(detail);
  } else if (Array.isArray(data) && data.length) {
    detail = data.map((d) => d.msg || JSON.stringify(d)).join("; ");
  }
  return detail && detail !== error.message ? `${error.message}: ${detail}` : error.message;
}
