// Handlers (admin): every handler an executor has served, with its
// executors (load, limit, last report), each executor's circuit breaker
// and why it is in its state, the breakers' history, and, for the handler
// chosen, its queue's history drawn and the executions waiting on it with
// why. Asked again every
// second: breakers and executors are not on the change feed.
import { api, must, type Schemas } from "../api";
import { ErrorBox, StateBadge, Time, useLoad, usePoll } from "../components";
import { route, setQuery } from "../router";
import { HistorySection } from "../chart";
import { ExecutionsTable } from "./executions";

type Handler = Schemas["HandlerInfo"];

export function Handlers() {
  const list = useLoad(() => must(api.GET("/v1/handlers")), []);
  usePoll(list.reload, 1000, true);
  const chosen = route.value.query.get("h") ?? "";
  const items = list.data?.items ?? [];
  const h = items.find((x) => x.handler === chosen);
  return (
    <>
      <h1>Handlers</h1>
      <p class="muted">
        What the executors report of each handler (a custom handler's name, <code>http:&lt;host&gt;</code>,{" "}
        <code>nats:&lt;subject&gt;</code>): a handler whose breaker is open on every executor gets no attempt until a
        probe succeeds, and its executions wait, saying so.
      </p>
      <ErrorBox error={list.error} />
      <table aria-busy={list.loading} class="handlers">
        <thead>
          <tr>
            <th scope="col">Handler</th><th scope="col">Queue</th><th scope="col">Breaker</th>
            <th scope="col">Executors</th><th scope="col">In flight</th><th scope="col">Last seen</th>
          </tr>
        </thead>
        <tbody>
          {items.map((x) => (
            <tr key={x.handler} data-handler={x.handler} data-breaker={x.breaker} class={x.breaker === "open" ? "warn" : ""}>
              <td>
                <button class="link" aria-pressed={x.handler === chosen} onClick={() => setQuery({ h: x.handler })}>{x.handler}</button>
              </td>
              <td class="mono">{x.queue}</td>
              <td><StateBadge state={x.breaker} /></td>
              <td>{x.executors.length === 0 ? <span class="muted">none now</span> : x.executors.length}</td>
              <td>{inFlight(x)}</td>
              <td><Time t={x.last_seen} /></td>
            </tr>
          ))}
          {!list.loading && items.length === 0 && <tr><td colSpan={6} class="muted">No executor has reported serving a handler yet.</td></tr>}
        </tbody>
      </table>
      {chosen && !h && list.data && <p class="muted">No executor has reported serving {chosen}.</p>}
      {h && <HandlerDetail h={h} />}
    </>
  );
}

function inFlight(h: Handler): string {
  let n = 0, limit = 0, limited = h.executors.length > 0;
  for (const x of h.executors) {
    n += x.in_flight;
    if (x.limit == null) limited = false;
    else limit += x.limit;
  }
  return limited ? `${n} of ${limit}` : String(n);
}

function HandlerDetail({ h }: { h: Handler }) {
  const waiting = useLoad(
    () => must(api.GET("/v1/executions", {
      params: { query: { handler: h.queue, state: ["queued", "failed"], limit: 20 } },
      querySerializer: { array: { style: "form", explode: false } }, // state=queued,failed
    })),
    [h.queue],
  );
  usePoll(waiting.reload, 1000, true);
  return (
    <section aria-labelledby="handler-title" data-detail={h.handler}>
      <h2 id="handler-title">{h.handler}</h2>
      <h3>Executors</h3>
      {h.executors.length === 0 && (
        <p class="muted" data-none>No executor serves it now{h.last_seen ? <>; one last did <Time t={h.last_seen} /></> : ""}.</p>
      )}
      {h.executors.length > 0 && (
        <table>
          <thead>
            <tr>
              <th scope="col">Executor</th><th scope="col">Version</th><th scope="col">Breaker</th><th scope="col">Since</th><th scope="col">Why</th>
              <th scope="col">Next probe</th><th scope="col">Failures / attempts</th><th scope="col">In flight / limit</th>
              <th scope="col">Reported</th>
            </tr>
          </thead>
          <tbody>
            {h.executors.map((x) => (
              <tr key={x.executor_id} data-executor={x.executor_id}>
                <td class="mono">{x.executor_id}</td>
                <td>{x.version ?? "—"}</td>
                <td><StateBadge state={x.breaker} /></td>
                <td><Time t={x.since} /></td>
                <td>{x.reason ?? ""}</td>
                <td>{x.probe_at ? <Time t={x.probe_at} /> : "—"}</td>
                <td>{x.failures} / {x.requests}</td>
                <td>{x.in_flight} / {x.limit ?? "no limit"}</td>
                <td><Time t={x.updated_at} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h3>Breaker history</h3>
      {h.history.length === 0 && <p class="muted">No transition recorded in the last week.</p>}
      <ol class="plain history">
        {h.history.map((c) => (
          <li key={c.since + c.executor_id + c.breaker}>
            <Time t={c.since} />: <StateBadge state={c.breaker} /> on <span class="mono">{c.executor_id}</span>
            {c.reason && <> — {c.reason}</>}
          </li>
        ))}
      </ol>
      <HistorySection title={"Executions of the queue " + h.queue + " and their lag"} filter={{ handler: h.queue }} initial="hour" />
      <h3>Waiting on its queue</h3>
      <p class="muted">Queued and retrying executions of the queue <code>{h.queue}</code>, with why each waits.</p>
      <ErrorBox error={waiting.error} />
      <ExecutionsTable items={waiting.data?.items ?? []} loading={waiting.loading} />
    </section>
  );
}
