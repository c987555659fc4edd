// Audit trail (admin): who changed what, newest first, with filters in the URL.
import { useState } from "preact/hooks";
import { api, must } from "../api";
import { ErrorBox, Pager, Time, useLoad } from "../components";
import { route, setQuery } from "../router";

const names = ["namespace", "actor", "action", "since", "until"] as const;

export function Audit() {
  const q = route.value.query;
  const f: Record<string, string> = {};
  for (const n of names) f[n] = q.get(n) ?? "";
  const cursor = q.get("cursor") ?? "";
  const [form, setForm] = useState(f);
  const list = useLoad(() => {
    const query: Record<string, unknown> = { limit: 50, cursor: cursor || undefined };
    for (const n of names) if (f[n]) query[n] = f[n];
    return must(api.GET("/v1/audit", { params: { query: query as any } }));
  }, [...names.map((n) => f[n]), cursor]);
  return (
    <>
      <h1>Audit trail</h1>
      <form class="filters" role="search" aria-label="Find audit entries" onSubmit={(e) => { e.preventDefault(); setQuery({ ...form }); }}>
        {names.map((n) => (
          <div key={n}>
            <label for={"a-" + n}>{n[0].toUpperCase() + n.slice(1)}</label>
            <input id={"a-" + n} value={form[n]} onInput={(e) => setForm({ ...form, [n]: e.currentTarget.value })} />
          </div>
        ))}
        <button type="submit">Search</button>
      </form>
      <ErrorBox error={list.error} />
      <table aria-busy={list.loading}>
        <thead>
          <tr><th scope="col">When</th><th scope="col">Actor</th><th scope="col">Namespace</th><th scope="col">Action</th><th scope="col">Resource</th></tr>
        </thead>
        <tbody>
          {list.data?.items.map((a) => (
            <tr key={a.id}>
              <td><Time t={a.at} /></td><td>{a.actor}</td><td>{a.namespace}</td><td><code>{a.action}</code></td><td class="mono">{a.resource}</td>
            </tr>
          ))}
          {list.data?.items.length === 0 && <tr><td colSpan={5} class="muted">No entry matches.</td></tr>}
        </tbody>
      </table>
      <Pager next={list.data?.next_cursor} cursor={cursor} onCursor={(c) => setQuery({ ...f, cursor: c })} />
    </>
  );
}
