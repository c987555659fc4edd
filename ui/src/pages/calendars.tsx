// Calendars: the days and windows jobs must not run in (or may run in
// alone), by namespace, and for one calendar the stretches of time it does
// not allow next, each with the rule that lists it.
import { useState } from "preact/hooks";
import { api, must } from "../api";
import type { components } from "../api.gen";
import { ErrorBox, Time, useLoad } from "../components";
import { href, route, setQuery } from "../router";

type Calendar = components["schemas"]["Calendar"];

/** rules counts a calendar's rules by kind: "2 dates, 1 weekly". */
function rules(c: Calendar): string {
  const parts: string[] = [];
  for (const [n, what] of [[c.dates?.length, "dates"], [c.windows?.length, "windows"], [c.weekly?.length, "weekly"],
    [c.daily?.length, "daily"], [c.days?.length, "day rules"]] as const) {
    if (n) parts.push(`${n} ${what}`);
  }
  return parts.join(", ") || "no rules";
}

export function Calendars() {
  const ns = route.value.query.get("namespace") ?? "";
  const [form, setForm] = useState(ns);
  const list = useLoad(() => must(api.GET("/v1/calendars", { params: { query: { namespace: ns || undefined } } })), [ns]);
  return (
    <>
      <h1>Calendars</h1>
      <form class="filters" role="search" aria-label="Choose a namespace" onSubmit={(e) => { e.preventDefault(); setQuery({ namespace: form }); }}>
        <div>
          <label for="c-namespace">Namespace</label>
          <input id="c-namespace" value={form} onInput={(e) => setForm(e.currentTarget.value)} placeholder="default" />
        </div>
        <button type="submit">Show</button>
      </form>
      <ErrorBox error={list.error} />
      <table aria-busy={list.loading}>
        <thead>
          <tr><th scope="col">Calendar</th><th scope="col">Time zone</th><th scope="col">Mode</th><th scope="col">Rules</th><th scope="col">Extends</th></tr>
        </thead>
        <tbody>
          {list.data?.items.map((c) => (
            <tr key={c.name} data-calendar={c.name}>
              <td><a href={href(`/calendars/${encodeURIComponent(c.name)}?namespace=${encodeURIComponent(c.namespace)}`)}>{c.namespace}/{c.name}</a></td>
              <td>{c.timezone || "UTC"}</td><td>{c.mode ?? "exclude"}</td><td>{rules(c)}</td><td>{(c.extends ?? []).join(", ") || "—"}</td>
            </tr>
          ))}
          {list.data?.items.length === 0 && <tr><td colSpan={5} class="muted">No calendar in this namespace (tockctl calendars apply -f FILE makes one).</td></tr>}
        </tbody>
      </table>
    </>
  );
}

export function CalendarDetail({ name }: { name: string }) {
  const ns = route.value.query.get("namespace") ?? "default";
  const cal = useLoad(() => must(api.GET("/v1/calendars/{name}", { params: { path: { name }, query: { namespace: ns, days: 30 } } })), [name, ns]);
  const c = cal.data;
  return (
    <>
      <h1>Calendar {ns}/{name}</h1>
      <ErrorBox error={cal.error} />
      {c && (
        <>
          {c.description && <p>{c.description}</p>}
          <dl class="props">
            <dt>Time zone</dt><dd>{c.timezone || "UTC"}</dd>
            <dt>Mode</dt><dd>{(c.mode ?? "exclude") === "include" ? "include: only what it lists is allowed" : "exclude: what it lists is not allowed"}</dd>
            <dt>Rules</dt><dd>{rules(c)}</dd>
            <dt>Extends</dt><dd>{(c.extends ?? []).map((x) => <a key={x} href={href(`/calendars/${encodeURIComponent(x)}?namespace=${encodeURIComponent(ns)}`)}>{x} </a>)}{!(c.extends ?? []).length && "—"}</dd>
            <dt>Revision</dt><dd>{c.revision}, changed <Time t={c.updated_at} /></dd>
          </dl>
          <h2>Not allowed in the next 30 days</h2>
          <table>
            <thead><tr><th scope="col">From</th><th scope="col">Until</th><th scope="col">Calendar</th><th scope="col">Why</th></tr></thead>
            <tbody>
              {(c.periods ?? []).map((p) => (
                <tr key={p.start} data-period={p.start}><td><Time t={p.start} /></td><td><Time t={p.end} /></td><td>{p.calendar}</td><td>{p.reason}</td></tr>
              ))}
              {(c.periods ?? []).length === 0 && <tr><td colSpan={4} class="muted">It allows every instant of the next 30 days.</td></tr>}
            </tbody>
          </table>
        </>
      )}
    </>
  );
}
