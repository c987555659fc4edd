// Notifications: the messages rules made (each with every attempt to
// deliver it), and the tabs to the rules and channels pages
// (notifyrules.tsx, notifychannels.tsx). Filters live in the URL; the
// history reloads every few seconds while Live is on: a message's
// attempts change without any change of a job or execution to announce it.
import { useEffect, useState } from "preact/hooks";
import { api, must, type Schemas } from "../api";
import { ErrorBox, NamespaceSelect, Pager, StateBadge, Time, useLoad, usePoll } from "../components";
import { href, route, setQuery } from "../router";

export type Channel = Schemas["Channel"];
export type Rule = Schemas["Rule"];
export type Notification = Schemas["Notification"];

/** Tabs moves between the three notification pages. */
export function Tabs() {
  const path = route.value.path;
  const tab = (to: string, label: string) => (
    <li><a href={href(to)} aria-current={path === to ? "page" : undefined}>{label}</a></li>
  );
  return (
    <nav class="tabs" aria-label="Notifications">
      <ul>
        {tab("/notifications", "History")}
        {tab("/notifications/rules", "Rules")}
        {tab("/notifications/channels", "Channels")}
      </ul>
    </nav>
  );
}

/** useChannels are the channels of namespace ns ("" = every one the caller may read). */
export function useChannels(ns: string) {
  return useLoad(() => must(api.GET("/v1/notification-channels", { params: { query: { namespace: ns || undefined } } })), [ns]);
}

/** useRules are the rules of namespace ns ("" = every one the caller may read). */
export function useRules(ns: string) {
  return useLoad(() => must(api.GET("/v1/notification-rules", { params: { query: { namespace: ns || undefined } } })), [ns]);
}

/** Message is what a notification's body says: notify.Message. */
type Message = {
  summary?: string;
  test?: boolean;
  rule?: { id: string; name: string };
  events?: {
    id: string; kind: string; at: string; summary: string;
    job?: { id: string; name: string }; execution_id?: string;
  }[];
};

const states = ["pending", "sent", "failed"] as const;

export function Notifications() {
  const q = route.value.query;
  const f = {
    namespace: q.get("namespace") ?? "",
    rule_id: q.get("rule_id") ?? "",
    job_id: q.get("job_id") ?? "",
    state: q.get("state") ?? "",
    cursor: q.get("cursor") ?? "",
  };
  const [form, setForm] = useState(f);
  useEffect(() => setForm(f), [route.value]);
  const list = useLoad(
    () => must(api.GET("/v1/notifications", {
      params: {
        query: {
          namespace: f.namespace || undefined,
          rule_id: f.rule_id || undefined,
          job_id: f.job_id || undefined,
          state: (f.state || undefined) as Schemas["NotificationState"] | undefined,
          cursor: f.cursor || undefined,
          limit: 50,
        },
      },
    })),
    [f.namespace, f.rule_id, f.job_id, f.state, f.cursor],
  );
  usePoll(list.reload, 5000, true);
  const rules = useRules(f.namespace);
  const formRules = useRules(form.namespace);
  const channels = useChannels(f.namespace);
  const ruleName = (id: string) => rules.data?.items.find((r) => r.id === id)?.name;
  const channel = (id: string) => channels.data?.items.find((c) => c.id === id);
  return (
    <>
      <div class="title-row">
        <h1>Notifications</h1>
        <button onClick={list.reload} disabled={list.loading}>Refresh</button>
      </div>
      <Tabs />
      <form class="filters" role="search" aria-label="Find notifications"
        onSubmit={(e) => { e.preventDefault(); setQuery({ ...form, cursor: undefined }); }}>
        <div>
          <label for="n-namespace">Namespace</label>
          <NamespaceSelect id="n-namespace" value={form.namespace} onChange={(namespace) => setForm({ ...form, namespace, rule_id: "" })} />
        </div>
        <div>
          <label for="n-rule">Rule</label>
          <select id="n-rule" value={form.rule_id} onChange={(e) => setForm({ ...form, rule_id: e.currentTarget.value })}>
            <option value="">any</option>
            {formRules.data?.items.map((r) => <option key={r.id} value={r.id}>{r.namespace}/{r.name}</option>)}
            {form.rule_id && !formRules.data?.items.some((r) => r.id === form.rule_id) && <option value={form.rule_id}>{form.rule_id}</option>}
          </select>
        </div>
        <div>
          <label for="n-job">Job id</label>
          <input id="n-job" class="mono" size={36} value={form.job_id} onInput={(e) => setForm({ ...form, job_id: e.currentTarget.value.trim() })} />
        </div>
        <div>
          <label for="n-state">State</label>
          <select id="n-state" value={form.state} onChange={(e) => setForm({ ...form, state: e.currentTarget.value })}>
            <option value="">any</option>
            {states.map((s) => <option key={s}>{s}</option>)}
          </select>
        </div>
        <button type="submit">Search</button>
      </form>
      <ErrorBox error={list.error} />
      <table aria-busy={list.loading && !list.data} class="notifications">
        <thead>
          <tr>
            <th scope="col">Made</th><th scope="col">State</th><th scope="col">Message</th><th scope="col">Rule</th>
            <th scope="col">Channel</th><th scope="col">Delivery attempts</th>
          </tr>
        </thead>
        <tbody>
          {list.data?.items.map((n) => {
            const m = n.body as Message;
            const c = channel(n.channel_id);
            return (
              <tr key={n.id} data-notification={n.id} data-state={n.state}>
                <td><Time t={n.created_at} /><div class="muted small">{n.namespace}</div></td>
                <td>
                  <StateBadge state={n.state} />
                  {n.state === "pending" && n.next_attempt_at && <div class="small muted">next <Time t={n.next_attempt_at} /></div>}
                  {n.sent_at && <div class="small muted">sent <Time t={n.sent_at} /></div>}
                </td>
                <td class="message">
                  <div>{m.summary}</div>
                  {(m.events?.length ?? 0) > 0 && (
                    <ul class="events">
                      {m.events!.map((e) => (
                        <li key={e.id}>
                          <code>{e.kind}</code>{" "}
                          {e.job && <a href={href("/jobs/" + e.job.id)}>{e.job.name}</a>}
                          {e.execution_id && <> · <a href={href("/executions/" + e.execution_id)}>execution</a></>}
                          {" "}<Time t={e.at} />
                        </li>
                      ))}
                    </ul>
                  )}
                </td>
                <td><a href={href("/notifications/rules?namespace=" + encodeURIComponent(n.namespace))}>{ruleName(n.rule_id) ?? m.rule?.name ?? n.rule_id}</a></td>
                <td>{c ? <>{c.name} <span class="muted small">{c.type}</span></> : <span class="muted mono small">{n.channel_id} (deleted)</span>}</td>
                <td>
                  {n.attempt_log.length === 0 ? <span class="muted">none yet</span> : (
                    <ol class="attempts">
                      {n.attempt_log.map((a, i) => (
                        <li key={i} class={a.error ? "bad" : "ok"}>
                          <Time t={a.at} />{" "}
                          <span class="mono">{a.status ?? "no answer"}</span>{" "}
                          <span class="muted small">{a.took_ms} ms{a.node ? " on " + a.node : ""}</span>
                          {a.error && <div class="attempt-error">{a.error}</div>}
                        </li>
                      ))}
                    </ol>
                  )}
                </td>
              </tr>
            );
          })}
          {list.data?.items.length === 0 && <tr><td colSpan={6} class="muted">No notification matches.</td></tr>}
        </tbody>
      </table>
      <Pager next={list.data?.next_cursor} cursor={f.cursor} onCursor={(cursor) => setQuery({ ...f, cursor })} />
    </>
  );
}

/** DeliveryOutcome says how one attempt (a test's) went. */
export function DeliveryOutcome({ r }: { r: Schemas["DeliveryResult"] }) {
  return r.delivered
    ? <span class="ok">delivered ({r.status}, {r.took_ms} ms)</span>
    : <span class="bad">not delivered{r.status ? " (" + r.status + ")" : ""}: {r.error}</span>;
}
