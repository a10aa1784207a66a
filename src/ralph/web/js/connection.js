// The page's one WebSocket to `ralph serve`: JSON-RPC 2.0 calls, the server's events, and
// reconnecting with back-off. A reconnect sends `initialize {since_seq}` with the highest
// `seq` seen, so the server replays exactly what was missed (docs/protocols/remote.md,
// "Reconnecting"). Events that come before initialize's answer are held and then handled
// in `seq` order: the server stops holding a new connection's live events back after a
// second, so on a slow network live events may overtake the replay. An event older than
// what was seen is dropped.

const BACKOFF_S = [0.5, 1, 2, 4, 8, 15];
const CALL_TIMEOUT_MS = 120000; // a call's answer; `timeoutMs: 0` waits as long as it takes
const CHECK_TIMEOUT_MS = 5000; // a socket that does not answer status/get in this is dead
const SILENCE_MS = 75000; // 2.5 heartbeats of `ralph serve`'s default 30 s

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
    this.closedForGood = false; // the token was refused: no more tries
    this.stopped = false; // the page let this connection go (another token)
    this.held = null; // events received before initialize's answer, or null
    this.generation = 0; // tries so far
    this.heard = 0; // when the socket last brought a message
    this.watchdogTimer = setInterval(() => this.watchdog(), 15000);
  }

  url() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const query = this.token ? `?token=${encodeURIComponent(this.token)}` : "";
    return `${scheme}//${location.host}/ws${query}`;
  }

  start() {
    if (this.stopped || this.closedForGood || this.ws) return;
    clearTimeout(this.timer);
    const generation = ++this.generation; // (a probe or timer of an older try is void)
    this.onState(this.opened ? "reconnecting" : "connecting", { attempt: this.attempt });
    let ws;
    try {
      ws = new WebSocket(this.url());
    } catch (error) {
      this.retry();
      return;
    }
    this.ws = ws;
    this.heard = Date.now();
    let upgraded = false;
    ws.onopen = () => {
      upgraded = true;
      this.held = [];
      const params = { protocolVersion: "1.0",
                       clientInfo: { name: "ralph-web", version: "1" } };
      if (this.lastSeq !== null) params.since_seq = this.lastSeq;
      // no time limit: a long catch-up is answered after it; a lost socket ends the call
      this.call("initialize", params, { timeoutMs: 0 }).then((init) => {
        const held = this.held || [];
        this.held = null;
        const replayed = init.replayed || 0;
        if (typeof init.last_seq === "number" && this.lastSeq !== null && !replayed
            && init.last_seq < this.lastSeq) {
          this.lastSeq = null; // the store is not the one seen before (it was reset)
        }
        // (a stable sort: the events of one frame share its seq and keep their order)
        held.sort((a, b) => (a[1].seq ?? -1) - (b[1].seq ?? -1));
        for (const [method, params] of held) this.event(method, params);
        if (typeof init.last_seq === "number") {
          this.lastSeq = Math.max(this.lastSeq ?? 0, init.last_seq);
        }
        const again = this.opened > 0;
        this.opened += 1;
        this.attempt = 0;
        this.onState("connected", { replayed });
        this.onOpen(init, again);
      }, (error) => {
        this.lastError = describeError(error);
        this.lost(ws);
      });
    };
    ws.onmessage = (message) => {
      this.heard = Date.now();
      this.receive(message.data);
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      if (!upgraded) {
        this.forget(ws);
        if (!this.closedForGood && !this.stopped) this.probe(generation);
      } else {
        this.lost(ws);
      }
    };
  }

  // The socket is done with (closed, or found dead): its calls fail, and a new try follows.
  lost(ws) {
    if (this.ws !== ws) return;
    this.forget(ws);
    ws.close();
    this.retry();
  }

  forget(ws) {
    if (this.ws !== ws) return;
    this.ws = null;
    for (const { reject, timer } of this.pending.values()) {
      clearTimeout(timer);
      reject(new RpcError(-1, "the connection was lost"));
    }
    this.pending.clear();
    this.held = null;
  }

  // A refused upgrade says nothing in a browser: ask over HTTP whether the token is wrong.
  probe(generation) {
    const headers = this.token ? { Authorization: `Bearer ${this.token}` } : {};
    const current = () => generation === this.generation && !this.stopped && !this.ws;
    fetch("/api/status", { headers, cache: "no-store" }).then((response) => {
      if (!current()) return;
      if (response.status === 401) {
        this.closedForGood = true;
        this.onState("rejected", { hadToken: Boolean(this.token) });
      } else {
        this.retry();
      }
    }, () => {
      if (current()) this.retry();
    });
  }

  retry() {
    if (this.stopped || this.closedForGood || this.ws) return;
    clearTimeout(this.timer);
    const base = BACKOFF_S[Math.min(this.attempt, BACKOFF_S.length - 1)];
    const delay = base * (0.8 + Math.random() * 0.4);
    this.attempt += 1;
    this.onState("reconnecting", { attempt: this.attempt, inSeconds: delay,
                                   reason: this.lastError });
    this.lastError = null;
    this.timer = setTimeout(() => this.start(), delay * 1000);
  }

  // The network is back or the page is looked at again (a phone waking up): waiting to
  // reconnect, try now rather than at the end of the back-off; connected, make sure the
  // socket still answers (after a sleep it is often dead without knowing it).
  reconnectNow() {
    if (this.stopped || this.closedForGood) return;
    if (this.ws) {
      this.check();
      return;
    }
    this.generation += 1; // a probe under way is void
    this.start();
  }

  check() {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return;
    this.call("status/get", undefined, { timeoutMs: CHECK_TIMEOUT_MS }).catch((error) => {
      if (error instanceof RpcError && error.code === -1) {
        this.lastError = "the server did not answer";
        this.lost(ws);
      }
    });
  }

  // Silence longer than a few heartbeats: ask whether anyone is still there.
  watchdog() {
    if (this.ws && Date.now() - this.heard > SILENCE_MS) {
      this.heard = Date.now();
      this.check();
    }
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.watchdogTimer);
    if (this.ws) this.ws.close();
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
        if (this.held) this.held.push([one.method, one.params || {}]);
        else this.event(one.method, one.params || {});
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

  call(method, params, { timeoutMs = CALL_TIMEOUT_MS } = {}) {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) {
      return Promise.reject(new RpcError(-1, "not connected to the server"));
    }
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = timeoutMs ? setTimeout(() => {
        this.pending.delete(id);
        reject(new RpcError(-1, `${method}: no answer in ${timeoutMs / 1000} s`));
      }, timeoutMs) : null;
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
