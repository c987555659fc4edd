// Execution detail: every attempt with its timing, output and error;
// cancel and retry.
import { api, can, must } from "../api";
import { ErrorBox, StateBadge, Time, useAction, useLoad } from "../components";
import { useLive } from "../live";
import { go, href } from "../router";
import { LogView } from "./logview";

function took(a?: string | null, b?: string | null): string {
  if (!a || !b) return "";
  const ms = new Date(b).getTime() - new Date(a).getTime();
  return ms < 1000 ? ms + " ms" : (ms / 1000).toFixed(1) + " s";
}

export function ExecutionDetail({ id }: { id: string }) {
  const x = useLoad(() => must(api.GET("/v1/executions/{id}", { params: { path: { id } } })), [id]);
  const act = useAction();
  useLive({ namespace: x.data?.namespace, job_id: x.data?.job_id, kind: "execution" }, (cs) => {
    if (cs.some((c) => c.execution_id === id)) x.reload();
  }, x.reload);
  if (!x.data) return <><h1>Execution</h1><ErrorBox error={x.error} />{!x.error && <p aria-busy="true">Loading…</p>}</>;
  const e = x.data;
  const ns = e.namespace;
  return (
    <>
      <div class="title-row">
        <h1>Execution <span class="mono">{e.id.slice(0, 8)}</span> <StateBadge state={e.state} /></h1>
        <div class="actions">
          {can("executions.cancel", ns) && (e.state === "queued" || e.state === "running" || e.state === "failed") && (
            <button disabled={act.running} onClick={() => act.run(async () => {
              await must(api.POST("/v1/executions/{id}/cancel", { params: { path: { id } } })); x.reload();
            })}>Cancel</button>
          )}
          {can("executions.retry", ns) && e.state === "dead" && (
            <button disabled={act.running} onClick={() => act.run(async () => {
              const n = await must(api.POST("/v1/executions/{id}/retry", { params: { path: { id } } }));
              if (n.id !== id) go("/executions/" + n.id); else x.reload();
            })}>Re-drive</button>
          )}
        </div>
      </div>
      <ErrorBox error={act.error} />
      <dl class="props">
        <dt>Job</dt><dd><a href={href("/jobs/" + e.job_id)}>{e.namespace}/{e.job_name}</a></dd>
        <dt>Scheduled for</dt><dd><Time t={e.scheduled_for} /> {e.manual && <span class="tag">manual</span>}{e.backfill && <span class="tag">backfill</span>}</dd>
        <dt>Dispatched</dt><dd><Time t={e.dispatched_at} /></dd>
        <dt>Started</dt><dd><Time t={e.started_at} /></dd>
        <dt>Finished</dt><dd><Time t={e.finished_at} /></dd>
        <dt>Attempts</dt><dd>{e.attempts}</dd>
        {e.next_attempt_at && <><dt>Next attempt</dt><dd><Time t={e.next_attempt_at} /></dd></>}
        {e.error && <><dt>Error</dt><dd><span class="mono">{e.error}</span> <a href="#log-title">The log</a> holds the rest.</dd></>}
      </dl>
      <h2>Attempts</h2>
      <table>
        <thead>
          <tr><th scope="col">#</th><th scope="col">Outcome</th><th scope="col">Started</th><th scope="col">Took</th><th scope="col">Executor</th><th scope="col">Error</th><th scope="col">Output</th></tr>
        </thead>
        <tbody>
          {(e.attempt_list ?? []).map((a) => (
            <tr key={a.number}>
              <td>{a.number}</td>
              <td>{a.outcome ? <StateBadge state={a.outcome} /> : <StateBadge state="running" />}</td>
              <td><Time t={a.started_at} /></td>
              <td>{took(a.started_at, a.finished_at)}</td>
              <td class="mono">{a.executor_id ?? ""}</td>
              <td class="mono wrap">{a.error ?? ""}</td>
              <td><pre class="output">{a.output ?? ""}</pre></td>
            </tr>
          ))}
          {(e.attempt_list ?? []).length === 0 && <tr><td colSpan={7} class="muted">No attempt yet.</td></tr>}
        </tbody>
      </table>
      <LogView id={id} attempts={e.attempts} running={e.state === "running" || e.state === "queued"} />
      {(e.notes ?? []).length > 0 && <>
        <h2>What tock did</h2>
        <ul class="notes">
          {(e.notes ?? []).map((n) => (
            <li key={n.at + n.kind}><Time t={n.at} /> <span class="tag">{n.kind}</span> {n.note}</li>
          ))}
        </ul>
      </>}
    </>
  );
}
