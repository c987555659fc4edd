// Pieces every page uses: the frame, states, times, errors, paging.
import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError, can, me, must, myNamespaces, setKey, signInNeeded, type Schemas } from "./api";
import { connected, paused } from "./live";
import { href, route } from "./router";

export function Frame({ children }: { children: ComponentChildren }) {
  const w = me.value;
  const path = route.value.path;
  const link = (to: string, label: string) => (
    <li>
      <a href={href(to)} aria-current={path === to || (to !== "/" && path.startsWith(to)) ? "page" : undefined}>
        {label}
      </a>
    </li>
  );
  return (
    <>
      <header class="top">
        <a class="brand" href={href("/")}>tock</a>
        <nav aria-label="Pages">
          <ul>
            {link("/", "Overview")}
            {link("/jobs", "Jobs")}
            {link("/executions", "Executions")}
            {can("handlers.list") && link("/handlers", "Handlers")}
            {can("notifications.list") && link("/notifications", "Notifications")}
            {can("calendars.list") && link("/calendars", "Calendars")}
            {can("concurrency.list") && link("/concurrency", "Waiting on")}
            {can("nodes.list") && link("/cluster", "Cluster")}
            {can("keys.list") && link("/keys", "Keys")}
            {can("audit.list") && link("/audit", "Audit")}
          </ul>
        </nav>
        <div class="who">
          <label class="switch">
            <input type="checkbox" checked={!paused.value} onChange={(e) => (paused.value = !e.currentTarget.checked)} />
            Live
            <span class={"dot " + (paused.value ? "off" : connected.value ? "on" : "wait")} aria-hidden="true" />
          </label>
          <span title={w?.key_id ? "key " + w.key_id : ""}>{w?.open ? "open (no keys)" : w?.subject}</span>
          {!w?.open && (
            <button class="link" onClick={() => { setKey(""); me.value = null; signInNeeded.value = true; }}>
              Sign out
            </button>
          )}
        </div>
      </header>
      <main id="main">{children}</main>
    </>
  );
}

/**
 * WaitReason says why an execution waits (the API's wait), with a link to
 * the handler's page when the reason is about its handler.
 */
export function WaitReason({ wait, compact = false }: { wait?: Schemas["ExecutionWait"] | null; compact?: boolean }) {
  if (!wait) return null;
  const h = wait.handler;
  const link = h && can("handlers.list") && (wait.reason === "breaker_open" || wait.reason === "no_executor" || wait.reason === "at_limit")
    ? <> <a href={href("/handlers?h=" + encodeURIComponent(h))}>The handler</a>.</> : null;
  if (compact) return <div class="wait-why" data-reason={wait.reason}>{wait.message}{link}</div>;
  return (
    <p class="wait-why" data-reason={wait.reason} role="status">
      <strong>Why it waits:</strong> {wait.message}.{link}
    </p>
  );
}

/**
 * usePoll calls f every ms while on (and live updates are not paused):
 * for what the change feed does not carry, such as a handler's breaker.
 */
export function usePoll(f: () => void, ms: number, on: boolean) {
  const ref = useRef(f);
  ref.current = f;
  useEffect(() => {
    if (!on) return;
    const t = setInterval(() => { if (!paused.value) ref.current(); }, ms);
    return () => clearInterval(t);
  }, [ms, on]);
}

export function StateBadge({ state }: { state: string }) {
  return <span class={"state s-" + state}>{state}</span>;
}

const rtf = new Intl.RelativeTimeFormat("en", { numeric: "auto" });

/** ago says how long before (or after) now t is, in words. */
export function ago(t: string | number | Date): string {
  const s = (new Date(t).getTime() - Date.now()) / 1000;
  const a = Math.abs(s);
  if (a < 60) return rtf.format(Math.round(s), "second");
  if (a < 3600) return rtf.format(Math.round(s / 60), "minute");
  if (a < 86400) return rtf.format(Math.round(s / 3600), "hour");
  return rtf.format(Math.round(s / 86400), "day");
}

export function Time({ t }: { t?: string | null }) {
  if (!t) return <span class="muted">—</span>;
  return <time dateTime={t} title={new Date(t).toISOString()}>{ago(t)}</time>;
}

/** ErrorBox shows a failed call: a 403 says what the role lacks. */
export function ErrorBox({ error }: { error: unknown }) {
  if (!error) return null;
  if (error instanceof ApiError) {
    const p = error.problem;
    return (
      <div class={"error" + (error.status === 403 ? " forbidden" : "")} role="alert">
        <strong>{error.status === 403 ? "Not allowed" : p.title}</strong>
        {p.detail && <span> — {p.detail}</span>}
        {p.errors && p.errors.length > 0 && (
          <ul>
            {p.errors.map((e) => (
              <li key={e.field}>
                <code>{e.field}</code>: {e.message}
              </li>
            ))}
          </ul>
        )}
      </div>
    );
  }
  return <div class="error" role="alert">{String(error)}</div>;
}

/**
 * useLoad runs load on mount and whenever deps change, keeping its result,
 * error and a reload function; a later load wins over an earlier one.
 */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]) {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => live && setState({ data, loading: false }),
      (error) => live && setState({ error, loading: false }),
    );
    return () => { live = false; };
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...state, reload, set: (data: T) => setState({ data, loading: false }) };
}

/**
 * useThrottled is f called at most once a second: the first call at once,
 * the last of those that follow within the second after it. A list that
 * reloads when live changes name executions it does not show would
 * otherwise reload on every change at thousands a second.
 */
export function useThrottled(f: () => void, ms = 1000): () => void {
  const state = useRef({ last: 0, timer: 0 as ReturnType<typeof setTimeout> | 0, f });
  state.current.f = f;
  useEffect(() => () => { if (state.current.timer) clearTimeout(state.current.timer); }, []);
  return useCallback(() => {
    const s = state.current;
    if (s.timer) return;
    const wait = s.last + ms - Date.now();
    if (wait <= 0) {
      s.last = Date.now();
      s.f();
      return;
    }
    s.timer = setTimeout(() => { s.timer = 0; s.last = Date.now(); s.f(); }, wait);
  }, [ms]);
}

/** Pager moves through a cursor-paged list: the first page, or the next. */
export function Pager({ next, cursor, onCursor }: { next?: string; cursor?: string; onCursor: (c?: string) => void }) {
  if (!next && !cursor) return null;
  return (
    <nav class="pager" aria-label="Pages of results">
      {cursor && <button onClick={() => onCursor(undefined)}>First page</button>}
      {next && <button onClick={() => onCursor(next)}>Next page</button>}
    </nav>
  );
}

/** Field is a labelled form control with the server's error for it. */
export function Field({ label, name, error, hint, children }: {
  label: string; name: string; error?: string; hint?: ComponentChildren; children: ComponentChildren;
}) {
  return (
    <div class={"field" + (error ? " invalid" : "")} data-field={name}>
      <label for={"f-" + name}>{label}</label>
      {children}
      {hint && <div class="hint" id={"h-" + name}>{hint}</div>}
      {error && <div class="field-error" id={"e-" + name} role="alert">{error}</div>}
    </div>
  );
}

/** busy wraps an action: errors land in setError, and the button disables meanwhile. */
export function useAction() {
  const [error, setError] = useState<unknown>(null);
  const [running, setRunning] = useState(false);
  const run = async (f: () => Promise<unknown>) => {
    setRunning(true);
    setError(null);
    try {
      await f();
    } catch (e) {
      setError(e);
    } finally {
      setRunning(false);
    }
  };
  return { error, running, run, setError };
}

let namespaceCache: Promise<string[]> | null = null;

/** namespaces are the ones the caller may pick: its grants', or every one. */
export function useNamespaces(): string[] {
  const mine = myNamespaces();
  const [all, setAll] = useState<string[]>([]);
  useEffect(() => {
    if (!mine.includes("*")) return;
    namespaceCache ??= must(api.GET("/v1/namespaces")).then((l) => l.items.map((n) => n.name)).catch(() => []);
    namespaceCache.then(setAll);
  }, []);
  if (!mine.includes("*")) return mine;
  return all.includes("default") ? all : ["default", ...all];
}

/** NamespaceSelect picks one namespace, or every one the caller may see. */
export function NamespaceSelect({ value, onChange, id = "f-namespace", any = true }: {
  value: string; onChange: (ns: string) => void; id?: string; any?: boolean;
}) {
  const names = useNamespaces();
  const all = myNamespaces().includes("*") || names.length === 1;
  // A choice is required (a form's): start from default, or the only one.
  useEffect(() => {
    if (!any && !value && names.length) onChange(names.includes("default") ? "default" : names[0]);
  }, [any, value, names.join("\u0000")]);
  return (
    <select id={id} value={value} onChange={(e) => onChange(e.currentTarget.value)}>
      {any && all && <option value="">every namespace</option>}
      {!all && !value && <option value="">choose…</option>}
      {names.map((n) => <option key={n} value={n}>{n}</option>)}
      {value && !names.includes(value) && <option value={value}>{value}</option>}
    </select>
  );
}
