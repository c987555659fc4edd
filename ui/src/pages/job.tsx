// Job detail: schedule and policies (calendars linked, the upcoming
// runs they exclude marked), dependencies (what the job waits
// for, what waits for it, its runs waiting now), recent executions
// (live), skipped ranges, backfills (start and stop); run now, pause,
// resume, delete.
import type { JSX } from "preact";
import { useState } from "preact/hooks";
import { api, can, must, type Job, type Schemas } from "../api";
import { ErrorBox, Pager, StateBadge, Time, useAction, useLoad, usePoll, useThrottled } from "../components";
import { useLive } from "../live";
import { go, href } from "../router";
import { HistorySection } from "../chart";
import { ExecutionsTable, applyChanges } from "./executions";
import { explain } from "./jobform";
import { describeSchedule } from "./jobs";

export function JobDetail({ id }: { id: string }) {
  const job = useLoad(() => must(api.GET("/v1/jobs/{id}", { params: { path: { id } } })), [id]);
  const [cursor, setCursor] = useState<string | undefined>();
  const xs = useLoad(
    () => must(api.GET("/v1/jobs/{id}/executions", { params: { path: { id }, query: { limit: 20, cursor } } })),
    [id, cursor],
  );
  const preview = useLoad(() => must(api.GET("/v1/jobs/{id}/preview", { params: { path: { id }, query: { count: 5 } } })), [id]);
  const skips = useLoad(() => must(api.GET("/v1/jobs/{id}/skips", { params: { path: { id }, query: { limit: 10 } } })), [id]);
  const backfills = useLoad(() => must(api.GET("/v1/jobs/{id}/backfills", { params: { path: { id }, query: { limit: 10 } } })), [id]);
  const graph = useLoad(() => must(api.GET("/v1/jobs/{id}/graph", { params: { path: { id } } })), [id]);
  // Only a job that waits for others has runs that wait.
  const dependent = (job.data?.depends_on ?? []).length > 0;
  const waiting = useLoad(
    () => dependent
      ? must(api.GET("/v1/jobs/{id}/executions", { params: { path: { id }, query: { state: "waiting", limit: 20 } } }))
      : Promise.resolve(null),
    [id, dependent],
  );
  const act = useAction();
  const reloadSoon = useThrottled(xs.reload);
  const reloadWaitingSoon = useThrottled(waiting.reload);
  const ns = job.data?.namespace ?? "";
  useLive({ namespace: ns, job_id: id }, (cs) => {
    if (cs.some((c) => c.kind === "job")) { job.reload(); graph.reload(); }
    const ex = cs.filter((c) => c.kind === "execution");
    if (ex.length && xs.data) {
      const { list, unknown } = applyChanges(xs.data.items, ex);
      if (unknown && !cursor) reloadSoon();
      else xs.set({ ...xs.data, items: list });
    }
    if (ex.length && dependent) reloadWaitingSoon();
  }, () => { job.reload(); xs.reload(); graph.reload(); waiting.reload(); });
  // Why its runs wait can change without a change of theirs (a breaker
  // opens or closes): the list is asked again every second while one waits.
  usePoll(xs.reload, 1000, (xs.data?.items ?? []).some((x) => x.wait));

  if (!job.data) return <><h1>Job</h1><ErrorBox error={job.error} />{!job.error && <p aria-busy="true">Loading…</p>}</>;
  const j = job.data;
  const doIt = (f: () => Promise<unknown>) => act.run(async () => { await f(); job.reload(); xs.reload(); });
  const words = j.schedule.cron ? explain(j.schedule.cron) : "";
  return (
    <>
      <div class="title-row">
        <h1>{j.namespace}/{j.name} <StateBadge state={j.state} /></h1>
        <div class="actions">
          {can("jobs.run", ns) && (
            <button disabled={act.running} onClick={() => doIt(async () => {
              const x = await must(api.POST("/v1/jobs/{id}/run", { params: { path: { id } } }));
              go("/executions/" + x.id);
            })}>Run now</button>
          )}
          {can("jobs.pause", ns) && j.state === "active" && (
            <button disabled={act.running} onClick={() => doIt(() => must(api.POST("/v1/jobs/{id}/pause", { params: { path: { id } } })))}>Pause</button>
          )}
          {can("jobs.resume", ns) && j.state === "paused" && (
            <button disabled={act.running} onClick={() => doIt(() => must(api.POST("/v1/jobs/{id}/resume", { params: { path: { id } }, body: { catch_up: false } })))}>Resume</button>
          )}
          {can("jobs.update", ns) && !j.applyset_locked && <a class="button" href={href("/jobs/" + id + "/edit")}>Edit</a>}
          {can("jobs.delete", ns) && !j.applyset_locked && (
            <button class="danger" disabled={act.running} onClick={() => {
              if (!window.confirm(`Delete ${j.namespace}/${j.name}? Its history stays until retention removes it.`)) return;
              void act.run(async () => { await must(api.DELETE("/v1/jobs/{id}", { params: { path: { id }, header: { "If-Match": `"${j.revision}"` } } })); go("/jobs?namespace=" + encodeURIComponent(j.namespace)); });
            }}>Delete</button>
          )}
        </div>
      </div>
      <ErrorBox error={act.error} />
      {j.applyset && (
        <p class="notice" role="note">
          Kept in files: apply set <code>{j.applyset}</code>.{" "}
          {j.applyset_locked
            ? "The set is locked: change the job in its files (tockctl apply); pausing and resuming stay allowed."
            : "A change made here is shown as drift by the set's next plan, and its next apply puts the files' definition back."}
        </p>
      )}
      {j.description && <p>{j.description}</p>}
      <div class="columns">
        <section aria-labelledby="sched">
          <h2 id="sched">Schedule</h2>
          <dl class="props">
            <dt>Schedule</dt><dd><code>{describeSchedule(j)}</code>{words && <div>{words}</div>}</dd>
            <dt>Next run</dt><dd><Time t={j.next_run_at} /></dd>
            <dt>Last run</dt><dd><Time t={j.last_run_at} /></dd>
            <dt>Last success</dt><dd><Time t={j.last_success_at} /></dd>
            <dt>Missed runs</dt><dd>{j.missed?.policy ?? "default"}</dd>
            <dt>Overlap</dt><dd>{j.overlap ?? "default"}</dd>
            {(j.calendars ?? []).length > 0 && (
              <>
                <dt>Calendars</dt>
                <dd>
                  {j.calendars!.map((c) => (
                    <a key={c} class="calendar" href={href(`/calendars/${encodeURIComponent(c)}?namespace=${encodeURIComponent(j.namespace)}`)}>{c} </a>
                  ))}
                  <div>excluded runs: {j.on_excluded === "next_allowed" ? "run once at the first allowed instant" : "skipped"}</div>
                </dd>
              </>
            )}
            <dt>Retry</dt><dd>{j.retry?.max_attempts ?? "default"} attempts</dd>
            <dt>Timeout</dt><dd>{j.timeout ?? "none"}</dd>
            <dt>Handler</dt><dd>{j.handler.type}: <code>{j.handler.url ?? j.handler.subject ?? j.handler.name}</code></dd>
            <dt>Labels</dt><dd>{Object.entries(j.labels ?? {}).map(([k, v]) => <code class="label" key={k}>{k}={v}</code>)}</dd>
          </dl>
        </section>
        <section aria-labelledby="next">
          <h2 id="next">Next runs</h2>
          <ErrorBox error={preview.error} />
          <ol class="fires">
            {preview.data?.fires.map((p) => (
              <li key={p.at}>
                {p.excluded ? <s><time dateTime={p.at}>{p.local}</time></s> : <time dateTime={p.at}>{p.local}</time>}
                {p.dst && <span class={"dst dst-" + p.dst}> DST {p.dst}</span>}
                {p.excluded && <span class="excluded"> excluded by {p.excluded.calendar}: {p.excluded.reason}</span>}
                {(p.waits_for ?? []).length > 0 && (
                  <ul class="waits">
                    {p.waits_for!.map((w) => <li key={w.job_id}>{w.note}</li>)}
                  </ul>
                )}
              </li>
            ))}
          </ol>
          {preview.data && preview.data.fires.length === 0 && <p class="muted">No further runs.</p>}
        </section>
      </div>
      <Dependencies job={j} graph={graph} waiting={waiting} />
      <HistorySection title="This job's executions and lag" filter={{ job_id: id }} />
      <section aria-labelledby="recent">
        <h2 id="recent">Executions</h2>
        <ErrorBox error={xs.error} />
        <ExecutionsTable items={xs.data?.items ?? []} loading={xs.loading} showJob={false} />
        <Pager next={xs.data?.next_cursor} cursor={cursor} onCursor={setCursor} />
      </section>
      <div class="columns">
        <section aria-labelledby="skips">
          <h2 id="skips">Skipped runs</h2>
          <ErrorBox error={skips.error} />
          {skips.data?.items.length === 0 && <p class="muted">None.</p>}
          <ul class="plain">
            {skips.data?.items.map((s) => (
              <li key={s.first + s.reason}>
                {s.runs} run{s.runs === 1 ? "" : "s"} {s.reason.replace(/_/g, " ")}: <Time t={s.first} /> to <Time t={s.last} />
                {s.detail && <div class="muted">{s.detail}</div>}
              </li>
            ))}
          </ul>
        </section>
        <Backfills id={id} ns={ns} list={backfills} />
      </div>
    </>
  );
}

/** onWords says in words what an upstream's run (who's) must end in to let a run go. */
export function onWords(on: Schemas["Upstream"]["on"], who = "it"): string {
  switch (on) {
    case "failure": return `when ${who} fails (ends dead)`;
    case "any": return `whenever ${who} ends (succeeded, dead or cancelled)`;
  }
  return `when ${who} succeeds`;
}

/** matchWords says how a run is matched to its upstreams' runs. */
function matchWords(m: Job["depends_match"]): string {
  if (m && typeof m === "object") return `the newest upstream run that ended within ${m.latest_within} before its time`;
  return "the upstream's run at the same scheduled time";
}

type Ref = Schemas["JobRef"];
type Edge = Schemas["JobEdge"];

/**
 * Dependencies shows what the job waits for (each upstream with what its
 * run must end in, and what those wait for in turn), how it waits, what
 * waits for it (from the graph, transitively), and its runs waiting now.
 * Nothing, for a job with no dependency either way.
 */
function Dependencies({ job: j, graph, waiting }: {
  job: Job;
  graph: { data?: Schemas["JobGraph"]; error?: unknown };
  waiting: { data?: Schemas["ExecutionList"] | null; error?: unknown };
}) {
  const ups = j.depends_on ?? [];
  const edges = graph.data?.edges ?? [];
  if (ups.length === 0 && edges.length === 0 && !graph.error) return null;
  const above = new Map<string, Edge[]>(), below = new Map<string, Edge[]>();
  for (const e of edges) {
    above.set(e.downstream.id, [...(above.get(e.downstream.id) ?? []), e]);
    below.set(e.upstream.id, [...(below.get(e.upstream.id) ?? []), e]);
  }
  const name = (r: { namespace?: string; name?: string }) => `${r.namespace ?? "?"}/${r.name ?? "?"}`;
  // tree lists the jobs on one side of id, nearest first, each once.
  const tree = (id: string, up: boolean, seen: Set<string>): JSX.Element | null => {
    const next = ((up ? above : below).get(id) ?? []).filter((e) => !seen.has((up ? e.upstream : e.downstream).id));
    if (next.length === 0) return null;
    for (const e of next) seen.add((up ? e.upstream : e.downstream).id);
    return (
      <ul>
        {next.map((e) => {
          const other: Ref = up ? e.upstream : e.downstream;
          return (
            <li key={other.id}>
              <a href={href("/jobs/" + other.id)}>{name(other)}</a>{" "}
              <span>— {up ? `${name(e.downstream)} runs ${onWords(e.on)}` : `runs ${onWords(e.on, e.upstream.id === j.id ? "this job" : name(e.upstream))}`}</span>
              {e.chain && <>{" "}<span class="tag">chain</span></>}
              {tree(other.id, up, seen)}
            </li>
          );
        })}
      </ul>
    );
  };
  const seenUp = new Set<string>([j.id, ...ups.map((u) => u.job_id)]);
  const downs = tree(j.id, false, new Set([j.id]));
  return (
    <section aria-labelledby="deps" class="deps">
      <h2 id="deps">Dependencies</h2>
      <ErrorBox error={graph.error} />
      <div class="columns">
        <div>
          <h3>Waits for</h3>
          {ups.length === 0 ? <p class="muted">No other job.</p> : (
            <>
              <ul class="upstreams">
                {ups.map((u) => (
                  <li key={u.job_id} data-upstream={u.job_id}>
                    {u.name
                      ? <a href={href("/jobs/" + u.job_id)}>{name(u)}</a>
                      : <span>a deleted job <span class="mono">{u.job_id}</span></span>}{" "}
                    <span>— runs {onWords(u.on)}</span>
                    {tree(u.job_id, true, seenUp)}
                  </li>
                ))}
              </ul>
              <dl class="props">
                <dt>Mode</dt>
                <dd>{j.depends_mode === "any" ? "any: the first upstream whose run ends as asked lets a run go" : "all: every upstream must let a run go"}</dd>
                <dt>Matched with</dt><dd>{matchWords(j.depends_match)}</dd>
                <dt>Wait timeout</dt><dd>{j.wait_timeout ?? "default"}, then {j.on_timeout === "run" ? "run anyway" : "skip the run"}</dd>
                <dt>Upstream skipped</dt>
                <dd>{j.on_upstream_skipped === "run" ? "run anyway" : "skip the run"} when an upstream's run was skipped or it has none at that time</dd>
                {j.chain && <><dt>Chain</dt><dd>yes: no schedule of its own; it runs at its upstreams' scheduled times</dd></>}
              </dl>
            </>
          )}
        </div>
        <div>
          <h3>Waited for by</h3>
          {downs ?? (graph.data && <p class="muted">No other job.</p>)}
        </div>
      </div>
      {ups.length > 0 && (
        <>
          <h3>Runs waiting now</h3>
          <ErrorBox error={waiting.error} />
          {waiting.data && waiting.data.items.length === 0 && <p class="muted">None.</p>}
          <ul class="plain">
            {waiting.data?.items.map((x) => (
              <li key={x.id} data-execution={x.id}>
                <a href={href("/executions/" + x.id)} class="mono">{x.id.slice(0, 8)}</a> scheduled for <Time t={x.scheduled_for} />
              </li>
            ))}
          </ul>
          {waiting.data?.next_cursor && <a href={href("/executions?state=waiting&job_id=" + j.id)}>Every waiting run</a>}
        </>
      )}
    </section>
  );
}

function Backfills({ id, ns, list }: { id: string; ns: string; list: ReturnType<typeof useLoad<any>> }) {
  const [from, setFrom] = useState("");
  const [to, setTo] = useState("");
  const act = useAction();
  return (
    <section aria-labelledby="backfills">
      <h2 id="backfills">Backfills</h2>
      <ErrorBox error={list.error} />
      {list.data?.items.length === 0 && <p class="muted">None.</p>}
      <ul class="plain">
        {list.data?.items.map((b: any) => (
          <li key={b.id}>
            {new Date(b.from).toISOString()} → {new Date(b.to).toISOString()}: {b.fired} of {b.total} fired
            {b.fired < b.total && can("backfills.stop", ns) && (
              <button class="small" onClick={() => act.run(async () => {
                await must(api.DELETE("/v1/jobs/{id}/backfills/{backfill_id}", { params: { path: { id, backfill_id: b.id } } }));
                list.reload();
              })}>Stop</button>
            )}
          </li>
        ))}
      </ul>
      {can("jobs.backfill", ns) && (
        <form class="inline" onSubmit={(e) => {
          e.preventDefault();
          void act.run(async () => {
            await must(api.POST("/v1/jobs/{id}/backfill", { params: { path: { id } },
              body: { from: new Date(from).toISOString(), to: new Date(to).toISOString() } as any }));
            list.reload();
          });
        }}>
          <label for="bf-from">From</label>
          <input id="bf-from" type="datetime-local" step="1" value={from} onInput={(e) => setFrom(e.currentTarget.value)} required />
          <label for="bf-to">To</label>
          <input id="bf-to" type="datetime-local" step="1" value={to} onInput={(e) => setTo(e.currentTarget.value)} required />
          <button type="submit" disabled={act.running}>Start backfill</button>
        </form>
      )}
      <ErrorBox error={act.error} />
    </section>
  );
}
