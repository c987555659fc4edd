// An execution's log (GET /v1/executions/{id}/logs): what its attempts
// wrote, an attempt at a time, followed live while it runs (server-sent
// events, resumed after a dropped stream with Last-Event-ID), searched,
// downloaded. The text goes into the page a chunk at a time, appended to
// the <pre> as text nodes rather than re-rendered: a log of megabytes
// stays cheap to follow.
import { useEffect, useRef, useState } from "preact/hooks";
import { api, authHeaders, must, type Schemas } from "../api";
import { read } from "../live";

type Entry = Schemas["LogEntry"];

function textOf(items: Entry[]): string {
  let s = "";
  for (const e of items) {
    if (e.gap_bytes) s += (s && !s.endsWith("\n") ? "\n" : "") + `[tock: ${e.gap_bytes} bytes not kept]\n`;
    else if (e.text) s += e.text;
  }
  return s;
}

export function LogView({ id, attempts, running }: { id: string; attempts: number; running: boolean }) {
  const latest = Math.max(attempts, 1);
  const [attempt, setAttempt] = useState(latest);
  const [search, setSearch] = useState("");
  const [query, setQuery] = useState("");
  const [state, setState] = useState<"loading" | "following" | "complete" | "error">("loading");
  const [bytes, setBytes] = useState(0);
  const pre = useRef<HTMLPreElement>(null);

  // A new attempt began: show it, unless another was picked.
  const picked = useRef(false);
  useEffect(() => { if (!picked.current) setAttempt(latest); }, [latest]);

  useEffect(() => {
    const el = pre.current;
    if (!el) return;
    el.textContent = "";
    let total = 0;
    const append = (items: Entry[]) => {
      const s = textOf(items);
      if (!s) return;
      const stick = el.scrollTop + el.clientHeight >= el.scrollHeight - 4;
      el.append(s);
      total += s.length;
      setBytes(total);
      if (stick) el.scrollTop = el.scrollHeight;
    };
    const stop = new AbortController();
    const follow = running && attempt === latest && !query;
    (async () => {
      try {
        if (!follow) {
          setState("loading");
          let after: string | undefined;
          do {
            // JSON (the answer's other forms are text and a stream).
            const page = (await must(api.GET("/v1/executions/{id}/logs", {
              params: { path: { id }, query: { attempt, q: query || undefined, after, limit: 1000 } },
              signal: stop.signal,
            }))) as Schemas["ExecutionLog"];
            append(page.items);
            after = page.next ?? undefined;
          } while (after && !stop.signal.aborted);
          setState("complete");
          return;
        }
        setState("following");
        let last = "";
        for (let delay = 500; !stop.signal.aborted;) {
          const headers: Record<string, string> = { ...authHeaders(), Accept: "text/event-stream" };
          if (last) headers["Last-Event-ID"] = last;
          const resp = await fetch(`/v1/executions/${id}/logs?follow=true&attempt=${attempt}`, { headers, signal: stop.signal });
          if (!resp.ok || !resp.body) throw new Error("log stream: " + resp.status);
          let ended = false;
          await read(resp.body, (ev, data, evID) => {
            if (ev === "log") {
              append((JSON.parse(data) as Schemas["ExecutionLog"]).items);
              if (evID) last = evID;
            } else if (ev === "end") ended = true;
          }, () => {});
          if (ended) { setState("complete"); return; }
          await new Promise((r) => setTimeout(r, delay));
          delay = Math.min(delay * 2, 5000);
        }
      } catch (e) {
        if (!stop.signal.aborted) setState("error");
      }
    })();
    return () => stop.abort();
  }, [id, attempt, query, running && attempt === latest]);

  const download = async () => {
    const resp = await fetch(`/v1/executions/${id}/logs?attempt=${attempt}&limit=1000`, { headers: { ...authHeaders(), Accept: "text/plain" } });
    let text = await resp.text();
    // Further pages, if any.
    for (let next = resp.headers.get("Tock-Log-Next"); next;) {
      const r = await fetch(`/v1/executions/${id}/logs?attempt=${attempt}&limit=1000&after=${encodeURIComponent(next)}`,
        { headers: { ...authHeaders(), Accept: "text/plain" } });
      text += await r.text();
      next = r.headers.get("Tock-Log-Next");
    }
    const a = document.createElement("a");
    a.href = URL.createObjectURL(new Blob([text], { type: "text/plain" }));
    a.download = `${id}.attempt-${attempt}.log`;
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
  };

  return (
    <section aria-labelledby="log-title">
      <div class="title-row">
        <h2 id="log-title">Log</h2>
        <div class="actions">
          <label>Attempt{" "}
            <select id="log-attempt" value={attempt} onChange={(e) => { picked.current = true; setAttempt(Number(e.currentTarget.value)); }}>
              {Array.from({ length: latest }, (_, i) => i + 1).map((n) => <option key={n} value={n}>{n}</option>)}
            </select>
          </label>
          <form role="search" onSubmit={(e) => { e.preventDefault(); setQuery(search.trim()); }}>
            <input id="log-search" type="search" aria-label="Search the log" placeholder="Search the log" value={search}
              onInput={(e) => setSearch(e.currentTarget.value)} />
            <button type="submit">Search</button>
          </form>
          <button type="button" onClick={download}>Download</button>
        </div>
      </div>
      <p class="muted" aria-live="polite" data-log-state={state}>
        {state === "following" ? "Following live… " : state === "loading" ? "Loading… " : state === "error" ? "The log could not be read. " : ""}
        {query ? `lines containing “${query}”, ` : ""}{bytes.toLocaleString()} characters
      </p>
      <pre ref={pre} class="log" role="log" tabIndex={0} aria-label={`Log of attempt ${attempt}`} />
    </section>
  );
}
