// Jobs: search by namespace, name prefix, label selector, handler and
// state (the filters live in the URL), with a count of the matches on the
// first page; bulk pause and resume by selector.
import { useState } from "preact/hooks";
import { api, can, must, type Job } from "../api";
import { ErrorBox, NamespaceSelect, Pager, StateBadge, Time, useAction, useLoad } from "../components";
import { useLive } from "../live";
import { href, route, setQuery } from "../router";

export function describeSchedule(j: Pick<Job, "schedule" | "chain">): string {
  const s = j.schedule;
  if (j.chain) return "after its upstreams (a chain)";
  if (s.cron) return s.cron + (s.timezone && s.timezone !== "UTC" ? " (" + s.timezone + ")" : "");
  if (s.at) return "once at " + new Date(s.at).toISOString();
  return "once";
}

export function Jobs() {
  const q = route.value.query;
  const f = {
    namespace: q.get("namespace") ?? "",
    name_prefix: q.get("name_prefix") ?? "",
    selector: q.get("selector") ?? "",
    state: q.get("state") ?? "",
    handler: q.get("handler") ?? "",
    cursor: q.get("cursor") ?? "",
  };
  const [form, setForm] = useState(f);
  const list = useLoad(
    () =>
      must(
        api.GET("/v1/jobs", {
          params: {
            query: {
              namespace: f.namespace || undefined,
              name_prefix: f.name_prefix || undefined,
              selector: f.selector || undefined,
              state: (f.state || undefined) as Job["state"] | undefined,
              handler: f.handler || undefined,
              cursor: f.cursor || undefined,
              count: f.cursor ? undefined : true,
              limit: 50,
            },
          },
        }),
      ),
    [f.namespace, f.name_prefix, f.selector, f.state, f.handler, f.cursor],
  );
  useLive({ namespace: f.namespace, kind: "job" }, (cs) => {
    const items = list.data?.items;
    if (!items) return;
    let reload = false;
    const next = items.map((j) => {
      const c = cs.find((c) => c.job_id === j.id);
      if (!c && cs.some((c) => !c.job_id && c.namespace === j.namespace)) reload = true;
      return c && c.state && c.state !== "deleted" ? { ...j, state: c.state as Job["state"] } : j;
    });
    if (reload || cs.some((c) => c.state === "deleted" || !items.some((j) => j.id === c.job_id))) list.reload();
    else list.set({ ...list.data!, items: next });
  }, list.reload);

  const bulk = useAction();
  const [bulkResult, setBulkResult] = useState("");
  const bulkChange = (op: "pause" | "resume") =>
    bulk.run(async () => {
      const what = `${op === "pause" ? "Pause" : "Resume"} every job in ${f.namespace}${f.selector ? " matching " + f.selector : ""}?`;
      if (!window.confirm(what)) return;
      const body = { namespace: f.namespace, selector: f.selector || undefined };
      const r =
        op === "pause"
          ? await must(api.POST("/v1/jobs:pause", { body }))
          : await must(api.POST("/v1/jobs:resume", { body: { ...body, catch_up: false } }));
      setBulkResult(`${op === "pause" ? "Paused" : "Resumed"} ${r.changed} of ${r.matched} matching jobs.`);
      list.reload();
    });

  const apply = (e: Event) => {
    e.preventDefault();
    setQuery({ ...form, cursor: undefined });
  };
  return (
    <>
      <div class="title-row">
        <h1>Jobs</h1>
        {can("jobs.create") && <a class="button" href={href("/jobs/new" + (f.namespace ? "?namespace=" + encodeURIComponent(f.namespace) : ""))}>New job</a>}
      </div>
      <form class="filters" onSubmit={apply} role="search" aria-label="Find jobs">
        <div>
          <label for="f-namespace">Namespace</label>
          <NamespaceSelect value={form.namespace} onChange={(namespace) => setForm({ ...form, namespace })} />
        </div>
        <div>
          <label for="f-name">Name starts with</label>
          <input id="f-name" value={form.name_prefix} onInput={(e) => setForm({ ...form, name_prefix: e.currentTarget.value })} />
        </div>
        <div>
          <label for="f-selector">Labels</label>
          <input id="f-selector" placeholder="team in (payments,billing),env!=dev" value={form.selector}
            onInput={(e) => setForm({ ...form, selector: e.currentTarget.value })} />
        </div>
        <div>
          <label for="f-handler">Handler</label>
          <input id="f-handler" placeholder="http, nats or a name" value={form.handler}
            onInput={(e) => setForm({ ...form, handler: e.currentTarget.value })} />
        </div>
        <div>
          <label for="f-state">State</label>
          <select id="f-state" value={form.state} onChange={(e) => setForm({ ...form, state: e.currentTarget.value })}>
            <option value="">any</option>
            <option>active</option>
            <option>paused</option>
            <option>completed</option>
          </select>
        </div>
        <button type="submit">Search</button>
      </form>
      {f.namespace && (can("jobs.pause", f.namespace) || can("jobs.resume", f.namespace)) && (
        <div class="bulk">
          <span>Every job in <strong>{f.namespace}</strong>{f.selector && <> matching <code>{f.selector}</code></>}:</span>
          {can("jobs.pause", f.namespace) && <button disabled={bulk.running} onClick={() => bulkChange("pause")}>Pause matching</button>}
          {can("jobs.resume", f.namespace) && <button disabled={bulk.running} onClick={() => bulkChange("resume")}>Resume matching</button>}
          {bulkResult && <span role="status">{bulkResult}</span>}
        </div>
      )}
      <ErrorBox error={bulk.error} />
      <ErrorBox error={list.error} />
      {list.data?.total !== undefined && (
        <p class="muted" role="status">
          {list.data.total_exact ? "" : "At least "}{list.data.total.toLocaleString()} {list.data.total === 1 ? "job matches" : "jobs match"}.
        </p>
      )}
      <table aria-busy={list.loading}>
        <thead>
          <tr>
            <th scope="col">Name</th><th scope="col">Namespace</th><th scope="col">State</th><th scope="col">Schedule</th>
            <th scope="col">Handler</th><th scope="col">Next run</th><th scope="col">Last success</th>
          </tr>
        </thead>
        <tbody>
          {list.data?.items.map((j) => (
            <tr key={j.id}>
              <td><a href={href("/jobs/" + j.id)}>{j.name}</a></td>
              <td>{j.namespace}</td>
              <td><StateBadge state={j.state} /></td>
              <td><code>{describeSchedule(j)}</code></td>
              <td>{j.handler.type === "custom" ? j.handler.name : j.handler.type}</td>
              <td><Time t={j.next_run_at} /></td>
              <td><Time t={j.last_success_at} /></td>
            </tr>
          ))}
          {list.data?.items.length === 0 && <tr><td colSpan={7} class="muted">No job matches.</td></tr>}
        </tbody>
      </table>
      <Pager next={list.data?.next_cursor} cursor={f.cursor} onCursor={(cursor) => setQuery({ ...f, cursor })} />
    </>
  );
}
