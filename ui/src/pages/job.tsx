// Job detail: schedule and policies, recent executions (live), skipped
// ranges, backfills (start and stop); run now, pause, resume, delete.
import { useState } from "preact/hooks";
import { api, can, must } from "../api";
import { ErrorBox, Pager, StateBadge, Time, useAction, useLoad, useThrottled } from "../components";
import { useLive } from "../live";
import { go, href } from "../router";
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
  const act = useAction();
  const reloadSoon = useThrottled(xs.reload);
  const ns = job.data?.namespace ?? "";
  useLive({ namespace: ns, job_id: id }, (cs) => {
    if (cs.some((c) => c.kind === "job")) job.reload();
    const ex = cs.filter((c) => c.kind === "execution");
    if (ex.length && xs.data) {
      const { list, unknown } = applyChanges(xs.data.items, ex);
      if (unknown && !cursor) reloadSoon();
      else xs.set({ ...xs.data, items: list });
    }
  }, () => { job.reload(); xs.reload(); });

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
          {can("jobs.update", ns) && <a class="button" href={href("/jobs/" + id + "/edit")}>Edit</a>}
          {can("jobs.delete", ns) && (
            <button class="danger" disabled={act.running} onClick={() => {
              if (!window.confirm(`Delete ${j.namespace}/${j.name}? Its history stays until retention removes it.`)) return;
              void act.run(async () => { await must(api.DELETE("/v1/jobs/{id}", { params: { path: { id } } })); go("/jobs?namespace=" + encodeURIComponent(j.namespace)); });
            }}>Delete</button>
          )}
        </div>
      </div>
      <ErrorBox error={act.error} />
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
              <li key={p.at}><time dateTime={p.at}>{p.local}</time>{p.dst && <span class={"dst dst-" + p.dst}> DST {p.dst}</span>}</li>
            ))}
          </ol>
          {preview.data && preview.data.fires.length === 0 && <p class="muted">No further runs.</p>}
        </section>
      </div>
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
              <li key={s.first + s.reason}>{s.runs} run{s.runs === 1 ? "" : "s"} {s.reason}: <Time t={s.first} /> to <Time t={s.last} /></li>
            ))}
          </ul>
        </section>
        <Backfills id={id} ns={ns} list={backfills} />
      </div>
    </>
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
