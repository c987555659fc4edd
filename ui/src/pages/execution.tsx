// Execution detail: every attempt with its timing, output and error;
// for a dependent job's run, what it waits for and the upstream runs that
// let it go (and the downstream runs this one let go); cancel and retry.
import { api, can, must, type Schemas } from "../api";
import { ErrorBox, StateBadge, Time, WaitReason, useAction, useLoad, usePoll, useThrottled } from "../components";
import { useLive } from "../live";
import { go, href } from "../router";
import { onWords } from "./job";
import { LogView } from "./logview";

function took(a?: string | null, b?: string | null): string {
  if (!a || !b) return "";
  const ms = new Date(b).getTime() - new Date(a).getTime();
  return ms < 1000 ? ms + " ms" : (ms / 1000).toFixed(1) + " s";
}

export function ExecutionDetail({ id }: { id: string }) {
  const x = useLoad(() => must(api.GET("/v1/executions/{id}", { params: { path: { id } } })), [id]);
  const act = useAction();
  const reloadSoon = useThrottled(x.reload);
  // While it waits, its upstreams' runs change what it waits for: the
  // namespace's changes are watched for them (upstreams elsewhere show
  // theirs on a reload).
  const waits = x.data?.state === "waiting";
  const upstreamJobs = new Set((x.data?.waiting_for ?? []).map((w) => w.job_id));
  useLive({ namespace: x.data?.namespace, job_id: waits ? undefined : x.data?.job_id, kind: "execution" }, (cs) => {
    if (cs.some((c) => c.execution_id === id)) x.reload();
    else if (cs.some((c) => c.job_id && upstreamJobs.has(c.job_id))) reloadSoon();
  }, x.reload);
  // Why it waits can change without a change of its own (a breaker opens
  // or closes, an executor comes or goes): asked again every second.
  usePoll(x.reload, 1000, !!x.data?.wait);
  if (!x.data) return <><h1>Execution</h1><ErrorBox error={x.error} />{!x.error && <p aria-busy="true">Loading…</p>}</>;
  const e = x.data;
  const ns = e.namespace;
  return (
    <>
      <div class="title-row">
        <h1>Execution <span class="mono">{e.id.slice(0, 8)}</span> <StateBadge state={e.state} /></h1>
        <div class="actions">
          {can("executions.cancel", ns) && (e.state === "queued" || e.state === "running" || e.state === "failed" || e.state === "waiting") && (
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
      <WaitReason wait={e.wait} />
      <dl class="props">
        <dt>Job</dt><dd><a href={href("/jobs/" + e.job_id)}>{e.namespace}/{e.job_name}</a></dd>
        <dt>Scheduled for</dt><dd><Time t={e.scheduled_for} /> {e.manual && <span class="tag">manual</span>}{e.backfill && <span class="tag">backfill</span>}</dd>
        <dt>Dispatched</dt><dd>{e.dispatched_at ? <Time t={e.dispatched_at} /> : e.wait ? "not yet (this dispatch)" : "—"}</dd>
        <dt>Started</dt><dd><Time t={e.started_at} /></dd>
        <dt>Finished</dt><dd><Time t={e.finished_at} /></dd>
        <dt>Attempts</dt><dd>{e.attempts}</dd>
        {e.next_attempt_at && e.state !== "waiting" && <><dt>Next attempt</dt><dd><Time t={e.next_attempt_at} /></dd></>}
        {e.error && <><dt>Error</dt><dd><span class="mono">{e.error}</span> <a href="#log-title">The log</a> holds the rest.</dd></>}
      </dl>
      {e.waiting_for && <WaitingFor edges={e.waiting_for} until={e.wait_until} />}
      {(e.upstreams ?? []).length > 0 && <Links id="upstreams" title="Let run by" links={e.upstreams!}
        what="The upstream runs that let this one go." />}
      {(e.released ?? []).length > 0 && <Links id="released" title="Released" links={e.released!}
        what="The downstream runs this one let go." />}
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

const statusWords: Record<Schemas["WaitEdge"]["status"], string> = {
  pending: "not decided yet",
  satisfied: "lets this run go",
  refused: "this run will not go",
};

/** WaitingFor lists a waiting execution's upstreams and where each stands. */
function WaitingFor({ edges, until }: { edges: Schemas["WaitEdge"][]; until?: string }) {
  return (
    <section aria-labelledby="waiting-for">
      <h2 id="waiting-for">Waiting for</h2>
      {until && <p>Waits until <time dateTime={until}>{new Date(until).toISOString()}</time> (<Time t={until} />) at most; then its job's <code>on_timeout</code> applies.</p>}
      {edges.length === 0 && <p class="muted">Nothing: its job no longer waits for others.</p>}
      <ul class="plain">
        {edges.map((w) => (
          <li key={w.job_id} data-upstream={w.job_id} data-status={w.status}>
            <a href={href("/jobs/" + w.job_id)}>{w.job_name ?? w.job_id}</a>:{" "}
            <strong>{w.status}</strong> ({statusWords[w.status]}); this run goes {onWords(w.on)}.
            <div class="muted">{w.detail}</div>
            {w.execution_id && <a href={href("/executions/" + w.execution_id)}>{w.job_name ?? "The upstream"}'s run</a>}
          </li>
        ))}
      </ul>
    </section>
  );
}

/** Links lists executions linked to this one by a dependency. */
function Links({ id, title, what, links }: { id: string; title: string; what: string; links: Schemas["ExecutionLink"][] }) {
  return (
    <section aria-labelledby={id}>
      <h2 id={id}>{title}</h2>
      <p class="muted">{what}</p>
      <ul class="plain">
        {links.map((l) => (
          <li key={l.execution_id} data-execution={l.execution_id}>
            <a href={href("/executions/" + l.execution_id)}>{l.namespace}/{l.job_name}'s run</a>{" "}
            scheduled for <Time t={l.scheduled_for} /> <StateBadge state={l.state} />
          </li>
        ))}
      </ul>
    </section>
  );
}
