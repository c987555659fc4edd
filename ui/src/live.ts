// The change feed (GET /v1/changes) read with fetch, not EventSource:
// EventSource cannot send the Authorization header. A watch reconnects
// after a dropped stream with Last-Event-ID, so nothing between is lost;
// told to resync (it fell too far behind, or the feed no longer holds its
// position), it reloads and watches again from now.
import { signal } from "@preact/signals";
import { useEffect, useRef } from "preact/hooks";
import { authHeaders, myNamespaces } from "./api";

export type Change = {
  kind: "execution" | "job";
  namespace: string;
  job_id?: string;
  execution_id?: string;
  state?: string;
  attempt?: number;
  at: string;
};

/** paused stops applying live changes everywhere (the header's switch). */
export const paused = signal(false);
/** connected says whether the change stream is open. */
export const connected = signal(false);

export type WatchFilter = { namespace?: string; job_id?: string; kind?: string };

/**
 * watch streams changes matching f to onChange (a batch at a time) until
 * the returned function is called; onResync is called when changes were
 * missed and lists must be reloaded, and onOpen when a stream starts from
 * now (not resumed): what changed before it opened is not in it.
 */
function watch(f: WatchFilter, onChange: (cs: Change[]) => void, onResync: () => void, onOpen: () => void): () => void {
  const stop = new AbortController();
  let last = "";
  const run = async () => {
    let delay = 500;
    while (!stop.signal.aborted) {
      try {
        const q = new URLSearchParams();
        for (const [k, v] of Object.entries(f)) if (v) q.set(k, v);
        const headers: Record<string, string> = { ...authHeaders(), Accept: "text/event-stream" };
        if (last) headers["Last-Event-ID"] = last;
        const resp = await fetch("/v1/changes?" + q.toString(), { headers, signal: stop.signal });
        if (resp.status === 401 || resp.status === 403) return; // the lists show the refusal
        if (!resp.ok || !resp.body) throw new Error("change feed: " + resp.status);
        connected.value = true;
        delay = 500;
        if (!last) onOpen();
        // The changes of each chunk read go out together: at thousands
        // a second, a page renders once per chunk, not once per change.
        let batch: Change[] = [];
        await read(resp.body, (ev, data, id) => {
          if (id) last = id;
          if (ev === "resync") {
            last = "";
            batch = [];
            onResync();
          } else if (ev === "execution" || ev === "job") {
            batch.push(JSON.parse(data) as Change);
          }
        }, () => {
          if (batch.length) onChange(batch);
          batch = [];
        });
      } catch (e) {
        if (stop.signal.aborted) return;
      } finally {
        connected.value = false;
      }
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10_000);
    }
  };
  void run();
  return () => stop.abort();
}

/** read parses a server-sent event stream (text/event-stream) into events. */
export async function read(body: ReadableStream<Uint8Array>, emit: (event: string, data: string, id: string) => void, flush: () => void) {
  const reader = body.getReader();
  const text = new TextDecoder();
  let buf = "";
  let event = "message", data = "", id = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += text.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, "");
      buf = buf.slice(nl + 1);
      if (line === "") {
        if (data !== "" || event === "resync") emit(event, data, id);
        event = "message"; data = ""; id = "";
      } else if (line.startsWith(":")) {
        // a keepalive comment
      } else {
        const c = line.indexOf(":");
        const field = c < 0 ? line : line.slice(0, c);
        const val = c < 0 ? "" : line.slice(c + 1).replace(/^ /, "");
        if (field === "event") event = val;
        else if (field === "data") data = data ? data + "\n" + val : val;
        else if (field === "id") id = val;
      }
    }
    flush();
  }
}

// One stream per tab, shared by every page that shows live changes, each
// filtering for itself: a browser keeps at most six HTTP/1.1 connections
// to a server, and a stream per list would take them all.
type Sub = { f: WatchFilter; onChange: (cs: Change[]) => void; onResync: () => void };
const subs = new Set<Sub>();
let stream: { ns: string; stop: () => void } | null = null;
let closing: ReturnType<typeof setTimeout> | undefined;

// A stream no page uses is closed a little later, not at once: the next
// page, mounted a moment after the last one left, goes on reading it
// rather than opening another.
const closeDelay = 3000;

/** streamNamespace is the namespace the shared stream must be filtered by: none for a caller who may see every one. */
function streamNamespace(f: WatchFilter): string {
  return myNamespaces().includes("*") ? "" : f.namespace ?? "";
}

function matches(f: WatchFilter, c: Change): boolean {
  return (!f.namespace || c.namespace === f.namespace) &&
    (!f.job_id || !c.job_id || c.job_id === f.job_id) &&
    (!f.kind || c.kind === f.kind);
}

// A page that is left closes its stream at once: a stream left to the
// browser may hold one of its six connections to the server after the
// page is gone.
addEventListener("pagehide", () => {
  clearTimeout(closing);
  stream?.stop();
  stream = null;
});

function subscribe(sub: Sub): () => void {
  clearTimeout(closing);
  subs.add(sub);
  const ns = streamNamespace(sub.f);
  if (!stream || stream.ns !== ns) {
    stream?.stop();
    const resync = () => { for (const s of subs) s.onResync(); };
    stream = {
      ns,
      // A page loads its data as it mounts, and a new stream opens a
      // moment later: a change between the two would be lost, so the
      // pages reload once the stream is open.
      stop: watch({ namespace: ns }, (cs) => {
        for (const s of subs) {
          const mine = cs.filter((c) => matches(s.f, c));
          if (mine.length) s.onChange(mine);
        }
      }, resync, resync),
    };
  }
  return () => {
    subs.delete(sub);
    if (subs.size === 0) {
      clearTimeout(closing);
      closing = setTimeout(() => {
        stream?.stop();
        stream = null;
      }, closeDelay);
    }
  };
}

/**
 * useLive calls onChange for live changes matching f while the page is
 * mounted and live updates are not paused; changes that arrive while
 * paused are dropped, and resuming reloads (onResync).
 */
export function useLive(f: WatchFilter, onChange: (cs: Change[]) => void, onResync: () => void) {
  const cb = useRef({ onChange, onResync });
  cb.current = { onChange, onResync };
  const isPaused = paused.value;
  const wasPaused = useRef(false);
  useEffect(() => {
    if (isPaused) {
      wasPaused.current = true;
      return;
    }
    if (wasPaused.current) cb.current.onResync();
    wasPaused.current = false;
    return subscribe({ f, onChange: (cs) => cb.current.onChange(cs), onResync: () => cb.current.onResync() });
  }, [f.namespace, f.job_id, f.kind, isPaused]);
}
