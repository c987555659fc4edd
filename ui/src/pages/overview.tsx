// Overview: how fast executions end and how, how late they start, what
// needs attention (dead executions, silent alerting jobs), and who owns
// the buckets.
import { useState } from "preact/hooks";
import { api, can, must, type Schemas } from "../api";
import { HistorySection } from "../chart";
import { ago, ErrorBox, StateBadge, Time, useLoad } from "../components";
import { useLive } from "../live";
import { href } from "../router";

const outcomes = ["succeeded", "failed", "dead", "cancelled", "running", "queued"] as const;
const window5m = 300;

/** perSecond is n executions over the 5-minute window as a rate, to two significant digits. */
function perSecond(n: number): string {
  const r = n / window5m;
  return r === 0 ? "0" : r >= 10 ? r.toFixed(0) : r.toPrecision(2);
}

/** silentAfter: an alerting job that has not succeeded for this long needs attention. */
const silentAfterMs = 25 * 3600 * 1000;

export function Overview() {
  const stats = useLoad(() => must(api.GET("/v1/stats", { params: { query: { since: "5m", group_by: "namespace" } } })), []);
  const dead = useLoad(
    () => must(api.GET("/v1/executions", { params: { query: { state: ["dead"], since: "24h", limit: 10, count: true } } })),
    [],
  );
  const alerting = useLoad(
    () => must(api.GET("/v1/jobs", { params: { query: { selector: "tock.io/alert=true", limit: 200 } } })),
    [],
  );
  const nodes = useLoad(() => (can("nodes.list") ? must(api.GET("/v1/nodes")) : Promise.resolve(null)), []);
  const [recent, setRecent] = useState<Record<string, number>>({});
  useLive({ kind: "execution" }, (cs) => {
    setRecent((r) => {
      const n = { ...r };
      for (const c of cs) if (c.state) n[c.state] = (n[c.state] ?? 0) + 1;
      return n;
    });
  }, () => { stats.reload(); dead.reload(); });

  const totals: Record<string, number> = {};
  let lagP99: number | undefined;
  for (const g of stats.data?.groups ?? []) {
    for (const [s, n] of Object.entries(g.counts)) totals[s] = (totals[s] ?? 0) + n;
    const p = g.lag_ms?.p99;
    if (p !== undefined) lagP99 = Math.max(lagP99 ?? 0, p);
  }
  const silent = (alerting.data?.items ?? []).filter(
    (j) => j.state !== "completed" && Date.now() - new Date(j.last_success_at ?? j.created_at).getTime() > silentAfterMs,
  );
  return (
    <>
      <h1>Overview</h1>
      <section aria-labelledby="rates">
        <h2 id="rates">Executions per second over the last 5 minutes (and their count)</h2>
        <ErrorBox error={stats.error} />
        <dl class="tiles">
          {outcomes.map((o) => (
            <div class={"tile s-" + o} key={o}>
              <dt>{o}</dt>
              <dd>{stats.data ? perSecond(totals[o] ?? 0) : "…"}<span class="muted small"> {stats.data ? `(${totals[o] ?? 0})` : ""}</span></dd>
            </div>
          ))}
          <div class="tile">
            <dt>fire lag p99</dt>
            <dd>{lagP99 === undefined ? "—" : lagP99.toFixed(0) + " ms"}</dd>
          </div>
        </dl>
        <p class="muted live-counts" aria-live="polite">
          Live since this page opened:{" "}
          {Object.keys(recent).length === 0
            ? "no changes yet"
            : Object.entries(recent).map(([s, n]) => `${n} ${s}`).join(", ")}
        </p>
      </section>
      <HistorySection title="Executions and lag" />
      <div class="columns">
        <section aria-labelledby="dead">
          <h2 id="dead">Dead in the last 24 hours{dead.data?.total !== undefined && `: ${dead.data.total}`}</h2>
          <ErrorBox error={dead.error} />
          {dead.data && dead.data.items.length === 0 && <p class="muted">None.</p>}
          <ul class="plain">
            {dead.data?.items.map((x) => (
              <li key={x.id}>
                <a href={href("/executions/" + x.id)}>{x.namespace}/{x.job_name}</a> <Time t={x.finished_at} />
                <div class="muted clip">{x.error}</div>
              </li>
            ))}
          </ul>
          {(dead.data?.total ?? 0) > 0 && <a href={href("/executions?state=dead&since=24h")}>All dead executions</a>}
        </section>
        <section aria-labelledby="silent">
          <h2 id="silent">Silent jobs</h2>
          <p class="muted">Jobs labelled <code>tock.io/alert=true</code> that have not succeeded for 25 hours.</p>
          <ErrorBox error={alerting.error} />
          {alerting.data && silent.length === 0 && <p class="muted">None.</p>}
          <ul class="plain">
            {silent.map((j) => (
              <li key={j.id}>
                <a href={href("/jobs/" + j.id)}>{j.namespace}/{j.name}</a> <StateBadge state={j.state} />{" "}
                <span class="muted">last success {j.last_success_at ? ago(j.last_success_at) : "never"}</span>
              </li>
            ))}
          </ul>
        </section>
      </div>
      {nodes.data && <NodesTable nodes={nodes.data.items} />}
    </>
  );
}

export function NodesTable({ nodes }: { nodes: Schemas["Node"][] }) {
  return (
    <section aria-labelledby="nodes">
      <h2 id="nodes">Scheduler nodes</h2>
      <table>
        <thead>
          <tr><th scope="col">Node</th><th scope="col">Address</th><th scope="col">Started</th><th scope="col">Buckets</th></tr>
        </thead>
        <tbody>
          {nodes.map((n) => (
            <tr key={n.node}>
              <td>{n.node}</td>
              <td>{n.addr ?? "—"}</td>
              <td><Time t={n.started_at} /></td>
              <td>{n.bucket_count}</td>
            </tr>
          ))}
          {nodes.length === 0 && <tr><td colSpan={4} class="muted">No scheduler node holds a lease.</td></tr>}
        </tbody>
      </table>
      <p><a href={href("/cluster")}>Buckets and their owners</a></p>
    </section>
  );
}
