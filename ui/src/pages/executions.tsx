// Executions: search by state, time range, job, handler and error text,
// with the filters in the URL; a count of every match; re-drive of dead
// executions one by one or every one selected.
import { useEffect, useState } from "preact/hooks";
import { api, can, must, type Execution } from "../api";
import { ErrorBox, NamespaceSelect, Pager, StateBadge, Time, WaitReason, useAction, useLoad, useThrottled } from "../components";
import type { Change } from "../live";
import { useLive } from "../live";
import { href, route, setQuery } from "../router";

const filterNames = ["namespace", "state", "job", "job_id", "handler", "since", "until", "error"] as const;

/**
 * applyChanges applies live execution changes to a list: the new state of
 * the executions it shows; unknown says some change was of one it does
 * not show (a new execution: reload to see it).
 */
export function applyChanges(items: Execution[], cs: Change[]): { list: Execution[]; unknown: boolean } {
  const byId = new Map(cs.filter((c) => c.execution_id).map((c) => [c.execution_id!, c]));
  let unknown = false;
  for (const id of byId.keys()) if (!items.some((x) => x.id === id)) unknown = true;
  const list = items.map((x) => {
    const c = byId.get(x.id);
    // A new state makes the old reason to wait stale: the next load says.
    return c && c.state
      ? { ...x, state: c.state as Execution["state"], attempts: Math.max(x.attempts, c.attempt ?? 0), wait: c.state === x.state ? x.wait : undefined }
      : x;
  });
  return { list, unknown };
}

export function ExecutionsTable({ items, loading, showJob = true, selected, onSelect }: {
  items: Execution[]; loading: boolean; showJob?: boolean;
  selected?: Set<string>; onSelect?: (id: string, on: boolean) => void;
}) {
  return (
    <table aria-busy={loading} class="executions">
      <thead>
        <tr>
          {onSelect && <th scope="col"><span class="sr-only">Select</span></th>}
          <th scope="col">Execution</th>
          {showJob && <th scope="col">Job</th>}
          <th scope="col">State</th><th scope="col">Scheduled</th><th scope="col">Attempts</th>
          <th scope="col">Finished</th><th scope="col">Error</th>
        </tr>
      </thead>
      <tbody>
        {items.map((x) => (
          <tr key={x.id} data-execution={x.id} data-state={x.state}>
            {onSelect && (
              <td>
                {x.state === "dead" && can("executions.retry", x.namespace) && (
                  <input type="checkbox" aria-label={"Select " + x.id} checked={selected?.has(x.id)}
                    onChange={(e) => onSelect(x.id, e.currentTarget.checked)} />
                )}
              </td>
            )}
            <td><a href={href("/executions/" + x.id)} class="mono">{x.id.slice(0, 8)}</a>{x.manual && <span class="tag">manual</span>}</td>
            {showJob && <td><a href={href("/jobs/" + x.job_id)}>{x.namespace}/{x.job_name}</a></td>}
            <td><StateBadge state={x.state} /><WaitReason wait={x.wait} compact /></td>
            <td><Time t={x.scheduled_for} /></td>
            <td>{x.attempts}</td>
            <td><Time t={x.finished_at} /></td>
            <td class="clip" title={x.error}>{x.error}</td>
          </tr>
        ))}
        {!loading && items.length === 0 && <tr><td colSpan={8} class="muted">No execution matches.</td></tr>}
      </tbody>
    </table>
  );
}

export function Executions() {
  const q = route.value.query;
  const f: Record<string, string> = {};
  for (const n of filterNames) f[n] = q.get(n) ?? "";
  const cursor = q.get("cursor") ?? "";
  const [form, setForm] = useState(f);
  const list = useLoad(() => {
    const query: Record<string, unknown> = { limit: 50, cursor: cursor || undefined };
    for (const n of filterNames) if (f[n]) query[n] = f[n];
    return must(api.GET("/v1/executions", { params: { query: query as any } }));
  }, [...filterNames.map((n) => f[n]), cursor]);
  // The count of every match comes after the page: over 30 days of
  // history it can take a second or more, and the page need not wait.
  // It starts once the page is in, so as not to slow the page down.
  const key = filterNames.map((n) => f[n]).join("\u0000");
  const [countKey, setCountKey] = useState<string | null>(null);
  useEffect(() => { if (!list.loading) setCountKey(key); }, [list.loading, key]);
  const total = useLoad(() => {
    if (countKey !== key) return new Promise<number | undefined>(() => {});
    const query: Record<string, unknown> = { limit: 1, count: true };
    for (const n of filterNames) if (f[n]) query[n] = f[n];
    return must(api.GET("/v1/executions", { params: { query: query as any } })).then((l) => l.total);
  }, [countKey === key ? key : null]);
  const reloadSoon = useThrottled(list.reload);
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const redrive = useAction();
  const [done, setDone] = useState("");
  useLive({ namespace: f.namespace, job_id: f.job_id, kind: "execution" }, (cs) => {
    if (!list.data) return;
    const { list: items, unknown } = applyChanges(list.data.items, cs);
    if (unknown && !cursor) reloadSoon();
    else list.set({ ...list.data, items });
  }, list.reload);

  const redriveSelected = () =>
    redrive.run(async () => {
      const ids = [...selected];
      let ok = 0;
      const failed: string[] = [];
      // A few at a time: each re-drive is its own request, authorised and audited on its own.
      for (let i = 0; i < ids.length; i += 4) {
        await Promise.all(ids.slice(i, i + 4).map((id) =>
          must(api.POST("/v1/executions/{id}/retry", { params: { path: { id } } })).then(() => ok++, () => failed.push(id))));
      }
      setSelected(new Set());
      setDone(`Re-drove ${ok} execution${ok === 1 ? "" : "s"}` + (failed.length ? `; ${failed.length} refused` : "") + ".");
      list.reload();
    });
  const dead = (list.data?.items ?? []).filter((x) => x.state === "dead" && can("executions.retry", x.namespace));
  return (
    <>
      <h1>Executions <span class="count" aria-live="polite">{total.data !== undefined ? `${total.data.toLocaleString("en")} matching` : total.error ? "" : "counting…"}</span></h1>
      <form class="filters" role="search" aria-label="Find executions" onSubmit={(e) => { e.preventDefault(); setQuery({ ...form }); }}>
        <div>
          <label for="f-namespace">Namespace</label>
          <NamespaceSelect value={form.namespace} onChange={(namespace) => setForm({ ...form, namespace })} />
        </div>
        <div>
          <label for="f-state">State</label>
          <select id="f-state" value={form.state} onChange={(e) => setForm({ ...form, state: e.currentTarget.value })}>
            <option value="">any</option>
            {["waiting", "queued", "running", "succeeded", "failed", "dead", "cancelled"].map((s) => <option key={s}>{s}</option>)}
          </select>
        </div>
        <div>
          <label for="f-job">Job name starts with</label>
          <input id="f-job" value={form.job} onInput={(e) => setForm({ ...form, job: e.currentTarget.value })} />
        </div>
        <div>
          <label for="f-handler">Handler</label>
          <input id="f-handler" value={form.handler} placeholder="http, nats or a name" onInput={(e) => setForm({ ...form, handler: e.currentTarget.value })} />
        </div>
        <div>
          <label for="f-since">Since</label>
          <input id="f-since" value={form.since} placeholder="24h or a time" onInput={(e) => setForm({ ...form, since: e.currentTarget.value })} />
        </div>
        <div>
          <label for="f-until">Until</label>
          <input id="f-until" value={form.until} placeholder="a time" onInput={(e) => setForm({ ...form, until: e.currentTarget.value })} />
        </div>
        <div>
          <label for="f-error">Error contains</label>
          <input id="f-error" value={form.error} onInput={(e) => setForm({ ...form, error: e.currentTarget.value })} />
        </div>
        <button type="submit">Search</button>
      </form>
      {f.job_id && <p>Executions of job <a href={href("/jobs/" + f.job_id)}>{f.job_id}</a> only.</p>}
      {dead.length > 0 && (
        <div class="bulk">
          <button onClick={() => setSelected(new Set(dead.map((x) => x.id)))}>Select every dead execution shown</button>
          <button disabled={selected.size === 0 || redrive.running} onClick={redriveSelected}>Re-drive {selected.size} selected</button>
        </div>
      )}
      {done && <p role="status">{done}</p>}
      <ErrorBox error={redrive.error} />
      <ErrorBox error={list.error} />
      <ExecutionsTable items={list.data?.items ?? []} loading={list.loading} selected={selected}
        onSelect={(id, on) => { const s = new Set(selected); if (on) s.add(id); else s.delete(id); setSelected(s); }} />
      <Pager next={list.data?.next_cursor} cursor={cursor} onCursor={(c) => setQuery({ ...f, cursor: c })} />
    </>
  );
}
