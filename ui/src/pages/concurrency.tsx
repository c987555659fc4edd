// Waiting on: the concurrency keys a namespace's executions hold or wait
// for, and for one key the executions holding its slots and those
// waiting, in the order they will start.
import { useState } from "preact/hooks";
import { api, must } from "../api";
import { ErrorBox, Time, useLoad } from "../components";
import { href, route, setQuery } from "../router";

export function Concurrency() {
  const q = route.value.query;
  const ns = q.get("namespace") ?? "";
  const key = q.get("key") ?? "";
  const scope = (q.get("scope") ?? "namespace") as "namespace" | "cluster";
  const [form, setForm] = useState(ns);
  const list = useLoad(
    () => must(api.GET("/v1/concurrency", { params: { query: { namespace: ns || undefined, key: key || undefined, scope: key ? scope : undefined } } })),
    [ns, key, scope],
  );
  const one = key ? list.data?.items[0] : undefined;
  return (
    <>
      <h1>{key ? `Waiting on ${key}` : "Waiting on"}</h1>
      <p class="muted">Concurrency keys in use: slots held by executions queued, running or retrying, and executions waiting for one.</p>
      <form class="filters" role="search" aria-label="Choose a namespace" onSubmit={(e) => { e.preventDefault(); setQuery({ namespace: form }); }}>
        <div>
          <label for="k-namespace">Namespace</label>
          <input id="k-namespace" value={form} onInput={(e) => setForm(e.currentTarget.value)} placeholder="default" />
        </div>
        <button type="submit">Show</button>
      </form>
      <ErrorBox error={list.error} />
      {!key && (
        <table aria-busy={list.loading}>
          <thead>
            <tr><th scope="col">Key</th><th scope="col">Scope</th><th scope="col">Held</th><th scope="col">Waiting</th><th scope="col">Oldest waiting since</th></tr>
          </thead>
          <tbody>
            {list.data?.items.map((k) => (
              <tr key={k.scope + k.key} data-key={k.key}>
                <td><a href={href(`/concurrency?namespace=${encodeURIComponent(ns)}&key=${encodeURIComponent(k.key)}&scope=${k.scope}`)}>{k.key}</a></td>
                <td>{k.scope}</td><td>{k.held}</td><td>{k.waiting}</td><td>{k.oldest_waiting ? <Time t={k.oldest_waiting} /> : "—"}</td>
              </tr>
            ))}
            {list.data?.items.length === 0 && <tr><td colSpan={5} class="muted">No execution holds or waits for a concurrency key.</td></tr>}
          </tbody>
        </table>
      )}
      {key && !list.loading && !one && <p class="muted">No execution holds or waits for this key now.</p>}
      {one && (
        <>
          <dl class="props">
            <dt>Scope</dt><dd>{one.scope}</dd>
            <dt>Held</dt><dd>{one.held}</dd>
            <dt>Waiting</dt><dd>{one.waiting}</dd>
          </dl>
          {([["Holding its slots", one.holding], ["Waiting, in the order they will start", one.queue]] as const).map(([title, rows]) => (
            <section key={title}>
              <h2>{title}</h2>
              <table>
                <thead><tr><th scope="col">Execution</th><th scope="col">Scheduled for</th><th scope="col">Since</th></tr></thead>
                <tbody>
                  {(rows ?? []).map((h) => (
                    <tr key={h.execution_id} data-execution={h.execution_id}>
                      <td><a href={href(`/executions/${h.execution_id}`)}>{h.execution_id.slice(0, 8)}</a></td>
                      <td><Time t={h.scheduled_for} /></td><td><Time t={h.since} /></td>
                    </tr>
                  ))}
                  {(rows ?? []).length === 0 && <tr><td colSpan={3} class="muted">None.</td></tr>}
                </tbody>
              </table>
            </section>
          ))}
        </>
      )}
    </>
  );
}
