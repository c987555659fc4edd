// Notification rules: the list (test, pause, resume, delete), and the form
// that creates or edits one, its label selector previewed against the
// jobs of its namespace it matches now (GET /v1/jobs?selector=).
import { useEffect, useState } from "preact/hooks";
import { api, ApiError, can, must, type Schemas } from "../api";
import { ErrorBox, Field, NamespaceSelect, Time, useAction, useLoad } from "../components";
import { go, href, route, setQuery } from "../router";
import { DeliveryOutcome, Tabs, useChannels, useRules, type Rule } from "./notifications";

type Kind = Schemas["NotifyEvent"];

/** events are the kinds a rule can ask for, in the API's order, each said in words. */
const events: [Kind, string][] = [
  ["execution.dead", "an execution is dead (its every attempt failed)"],
  ["execution.failed", "an attempt failed and will be retried"],
  ["job.failing", "a job is failing (dead executions in a row)"],
  ["job.recovered", "a failing job succeeded again"],
  ["job.silent", "a recurring job has not succeeded within its interval"],
  ["execution.late", "an execution started late"],
  ["execution.slow", "an execution ran long"],
  ["handler.open", "a handler's circuit breaker opened"],
  ["handler.close", "a handler's circuit breaker closed"],
  ["execution.dependency_timeout", "a dependent run waited out its upstreams"],
];

export function Rules() {
  const ns = route.value.query.get("namespace") ?? "";
  const rules = useRules(ns);
  const channels = useChannels(ns);
  const act = useAction();
  const [tested, setTested] = useState<{ rule: Rule; result: Schemas["RuleTestResult"] } | null>(null);
  const channelName = (id: string) => channels.data?.items.find((c) => c.id === id)?.name ?? id;
  const patch = (r: Rule, paused: boolean) =>
    act.run(async () => {
      await must(api.PATCH("/v1/notification-rules/{id}", { params: { path: { id: r.id } }, body: { paused } }));
      rules.reload();
    });
  return (
    <>
      <div class="title-row">
        <h1>Notification rules</h1>
        {can("rules.create") && <a class="button" href={href("/notifications/rules/new" + (ns ? "?namespace=" + encodeURIComponent(ns) : ""))}>New rule</a>}
      </div>
      <Tabs />
      <form class="filters" role="search" aria-label="Find rules" onSubmit={(e) => e.preventDefault()}>
        <div>
          <label for="r-namespace">Namespace</label>
          <NamespaceSelect id="r-namespace" value={ns} onChange={(namespace) => setQuery({ namespace })} />
        </div>
      </form>
      <ErrorBox error={rules.error} />
      <ErrorBox error={act.error} />
      {tested && (
        <div class="notice" role="status">
          Test of rule <strong>{tested.rule.name}</strong>:
          <ul>
            {tested.result.items.map((r) => (
              <li key={r.channel_id}>{channelName(r.channel_id)}: <DeliveryOutcome r={r} /></li>
            ))}
            {tested.result.items.length === 0 && <li>the rule has no channel: nothing was sent</li>}
          </ul>
        </div>
      )}
      <table aria-busy={rules.loading && !rules.data}>
        <thead>
          <tr>
            <th scope="col">Name</th><th scope="col">Namespace</th><th scope="col">Jobs</th><th scope="col">Events</th>
            <th scope="col">Channels</th><th scope="col">State</th><th scope="col">Last message</th>
            <th scope="col"><span class="sr-only">Actions</span></th>
          </tr>
        </thead>
        <tbody>
          {rules.data?.items.map((r) => (
            <tr key={r.id} data-rule={r.id}>
              <td>{r.name}</td>
              <td>{r.namespace}</td>
              <td>{r.selector ? <code>{r.selector}</code> : <span class="muted">every job</span>}</td>
              <td>{r.events.map((e) => <span key={e} class="tag">{e}</span>)}</td>
              <td>{r.channels.length ? r.channels.map((c) => <span key={c} class="tag">{channelName(c)}</span>) : <span class="muted">none: it sends nothing</span>}</td>
              <td><StateOf paused={r.paused} /></td>
              <td>
                <Time t={r.last_sent_at} />
                <div><a class="small" href={href("/notifications?namespace=" + encodeURIComponent(r.namespace) + "&rule_id=" + r.id)}>History</a></div>
              </td>
              <td class="row-actions">
                {can("rules.update", r.namespace) && <a class="button small" href={href("/notifications/rules/" + r.id)}>Edit</a>}
                {can("rules.test", r.namespace) && (
                  <button class="small" disabled={act.running} onClick={() => act.run(async () => {
                    setTested(null);
                    setTested({ rule: r, result: await must(api.POST("/v1/notification-rules/{id}/test", { params: { path: { id: r.id } } })) });
                  })}>Test</button>
                )}
                {can("rules.update", r.namespace) && (r.paused
                  ? <button class="small" disabled={act.running} onClick={() => patch(r, false)}>Resume</button>
                  : <button class="small" disabled={act.running} onClick={() => patch(r, true)}>Pause</button>)}
                {can("rules.delete", r.namespace) && (
                  <button class="small danger" disabled={act.running} onClick={() => {
                    if (!window.confirm(`Delete rule ${r.namespace}/${r.name}? Its events not yet sent are dropped; its messages stay listed.`)) return;
                    void act.run(async () => {
                      await must(api.DELETE("/v1/notification-rules/{id}", { params: { path: { id: r.id } } }));
                      rules.reload();
                    });
                  }}>Delete</button>
                )}
              </td>
            </tr>
          ))}
          {rules.data?.items.length === 0 && <tr><td colSpan={8} class="muted">No rule{ns ? " in " + ns : ""}.</td></tr>}
        </tbody>
      </table>
    </>
  );
}

export function StateOf({ paused }: { paused: boolean }) {
  return <span class={"state " + (paused ? "s-paused" : "s-active")}>{paused ? "paused" : "active"}</span>;
}

type Form = {
  namespace: string; name: string; selector: string; events: Kind[]; channels: string[];
  failing_after: string; silent_grace: string; late_after: string; slow_after: string; group_interval: string; paused: boolean;
};

const empty: Form = {
  namespace: "", name: "", selector: "", events: ["execution.dead"], channels: [],
  failing_after: "3", silent_grace: "1m", late_after: "1m", slow_after: "10m", group_interval: "1m", paused: false,
};

function fromRule(r: Rule): Form {
  return {
    namespace: r.namespace, name: r.name, selector: r.selector, events: [...r.events], channels: [...r.channels],
    failing_after: String(r.failing_after), silent_grace: r.silent_grace, late_after: r.late_after,
    slow_after: r.slow_after, group_interval: r.group_interval, paused: r.paused,
  };
}

/** RuleForm creates a rule (id absent) or edits rule id. */
export function RuleForm({ id }: { id?: string }) {
  const [f, setF] = useState<Form>({ ...empty, namespace: route.value.query.get("namespace") ?? "" });
  const rule = useLoad(async () => {
    if (!id) return null;
    const r = await must(api.GET("/v1/notification-rules/{id}", { params: { path: { id } } }));
    setF(fromRule(r));
    return r;
  }, [id]);
  const channels = useChannels(f.namespace);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const save = useAction();
  const set = <K extends keyof Form>(k: K, v: Form[K]) => setF((f) => ({ ...f, [k]: v }));
  const toggle = <T,>(list: T[], v: T, on: boolean) => (on ? [...list.filter((x) => x !== v), v] : list.filter((x) => x !== v));
  // A field's error, or the first of its items' (channels[1]).
  const err = (name: string) => errors[name] ?? Object.entries(errors).find(([k]) => k.startsWith(name + "["))?.[1];

  if (id && !rule.data) return <><h1>Edit rule</h1><ErrorBox error={rule.error} />{!rule.error && <p aria-busy="true">Loading…</p>}</>;
  const ns = f.namespace;
  const allowed = id ? can("rules.update", ns) : can("rules.create", ns || "default") || can("rules.create");
  const submit = (e: Event) => {
    e.preventDefault();
    const local: Record<string, string> = {};
    const failing = Number(f.failing_after);
    if (!Number.isInteger(failing)) local["failing_after"] = "must be a whole number";
    setErrors(local);
    if (Object.keys(local).length) return;
    const fields = {
      name: f.name, selector: f.selector.trim(), events: f.events, channels: f.channels, failing_after: failing,
      silent_grace: f.silent_grace, late_after: f.late_after, slow_after: f.slow_after, group_interval: f.group_interval,
      paused: f.paused,
    };
    void save.run(async () => {
      try {
        if (id) await must(api.PATCH("/v1/notification-rules/{id}", { params: { path: { id } }, body: fields }));
        else await must(api.POST("/v1/notification-rules", { body: { ...fields, namespace: ns || undefined } }));
        go("/notifications/rules" + (ns ? "?namespace=" + encodeURIComponent(ns) : ""));
      } catch (e) {
        if (e instanceof ApiError) setErrors(e.fieldErrors());
        throw e;
      }
    });
  };
  const r = rule.data;
  return (
    <>
      <h1>{r ? `Edit rule ${r.namespace}/${r.name}` : "New rule"}</h1>
      <Tabs />
      {!allowed && <div class="error forbidden" role="alert">Your role may not {id ? "change" : "create"} notification rules{ns ? " in " + ns : ""}.</div>}
      <form class="job-form" onSubmit={submit} noValidate>
        <fieldset disabled={!allowed || save.running}>
          <legend>Rule</legend>
          <Field label="Namespace" name="namespace" error={errors["namespace"]}>
            {id ? <input id="f-namespace" value={ns} disabled />
              : <NamespaceSelect value={ns} any={false} onChange={(v) => setF((f) => ({ ...f, namespace: v, channels: v === f.namespace ? f.channels : [] }))} />}
          </Field>
          <Field label="Name" name="name" error={errors["name"]}>
            <input id="f-name" value={f.name} aria-invalid={!!errors["name"]} onInput={(e) => set("name", e.currentTarget.value)} />
          </Field>
          <Field label="Jobs (label selector)" name="selector" error={errors["selector"]}
            hint={<>The namespace's jobs the rule watches: <code>team=payments,tier!=batch</code>; empty for every job.</>}>
            <input id="f-selector" class="mono" value={f.selector} aria-invalid={!!errors["selector"]} aria-describedby="h-selector selector-preview"
              onInput={(e) => set("selector", e.currentTarget.value)} />
          </Field>
          {ns && <SelectorPreview namespace={ns} selector={f.selector} />}
        </fieldset>
        <fieldset disabled={!allowed || save.running} data-field="events" class={err("events") ? "invalid" : ""}>
          <legend>Events worth a message</legend>
          {events.map(([e, words]) => (
            <label key={e} class="check">
              <input type="checkbox" name="events" value={e} checked={f.events.includes(e)}
                onChange={(ev) => set("events", toggle(f.events, e, ev.currentTarget.checked))} />
              <code>{e}</code> <span class="muted">{words}</span>
            </label>
          ))}
          {err("events") && <div class="field-error" role="alert">{err("events")}</div>}
        </fieldset>
        <fieldset disabled={!allowed || save.running} data-field="channels" class={err("channels") ? "invalid" : ""}>
          <legend>Channels</legend>
          <ErrorBox error={channels.error} />
          {channels.data?.items.map((c) => (
            <label key={c.id} class="check">
              <input type="checkbox" name="channels" value={c.id} checked={f.channels.includes(c.id)}
                onChange={(ev) => set("channels", toggle(f.channels, c.id, ev.currentTarget.checked))} />
              {c.name} <span class="muted">{c.type}{c.paused ? ", paused" : ""}</span>
            </label>
          ))}
          {channels.data?.items.length === 0 && (
            <p class="muted">No channel in {ns}: <a href={href("/notifications/channels?namespace=" + encodeURIComponent(ns))}>create one</a> first.</p>
          )}
          {err("channels") && <div class="field-error" role="alert">{err("channels")}</div>}
        </fieldset>
        <fieldset disabled={!allowed || save.running}>
          <legend>Thresholds</legend>
          <Field label="Dead executions in a row for job.failing" name="failing_after" error={errors["failing_after"]}>
            <input id="f-failing_after" inputMode="numeric" value={f.failing_after} onInput={(e) => set("failing_after", e.currentTarget.value)} />
          </Field>
          <Field label="Grace before job.silent" name="silent_grace" error={errors["silent_grace"]} hint="A duration past the schedule's interval, e.g. 5m">
            <input id="f-silent_grace" value={f.silent_grace} onInput={(e) => set("silent_grace", e.currentTarget.value)} />
          </Field>
          <Field label="Late after" name="late_after" error={errors["late_after"]} hint="For execution.late: how long after its time an execution may start">
            <input id="f-late_after" value={f.late_after} onInput={(e) => set("late_after", e.currentTarget.value)} />
          </Field>
          <Field label="Slow after" name="slow_after" error={errors["slow_after"]} hint="For execution.slow: how long an execution's last attempt may run">
            <input id="f-slow_after" value={f.slow_after} onInput={(e) => set("slow_after", e.currentTarget.value)} />
          </Field>
          <Field label="Group interval" name="group_interval" error={errors["group_interval"]}
            hint="The least time between two messages of the rule to a channel; what happens in between goes out together">
            <input id="f-group_interval" value={f.group_interval} onInput={(e) => set("group_interval", e.currentTarget.value)} />
          </Field>
          <label class="check">
            <input type="checkbox" id="f-paused" checked={f.paused} onChange={(e) => set("paused", e.currentTarget.checked)} />
            Paused (sends nothing; what happens meanwhile is not sent later)
          </label>
        </fieldset>
        <ErrorBox error={save.error} />
        <div class="actions">
          <button type="submit" disabled={!allowed || save.running}>{id ? "Save" : "Create rule"}</button>
          <a href={href("/notifications/rules" + (ns ? "?namespace=" + encodeURIComponent(ns) : ""))}>Cancel</a>
        </div>
      </form>
    </>
  );
}

/** previewLimit is how many matching jobs the preview reads: it says "at least" past it. */
const previewLimit = 500;

/** SelectorPreview lists the jobs of namespace a selector matches now, or the API's fault with it. */
function SelectorPreview({ namespace, selector }: { namespace: string; selector: string }) {
  const [state, setState] = useState<{ jobs?: Schemas["JobList"]; error?: unknown; for?: string }>({});
  useEffect(() => {
    const key = namespace + "\u0000" + selector;
    const t = setTimeout(() => {
      must(api.GET("/v1/jobs", { params: { query: { namespace, selector: selector.trim() || undefined, limit: previewLimit } } })).then(
        (jobs) => setState({ jobs, for: key }),
        (error) => setState({ error, for: key }),
      );
    }, 250);
    return () => clearTimeout(t);
  }, [namespace, selector]);
  const items = state.jobs?.items ?? [];
  const more = !!state.jobs?.next_cursor;
  return (
    <div class="preview" id="selector-preview" aria-live="polite" data-preview={state.jobs ? "jobs" : state.error ? "error" : "loading"}>
      {state.error instanceof ApiError && state.error.status < 500
        ? <><p>This selector is refused:</p><ErrorBox error={state.error} /></>
        : <ErrorBox error={state.error} />}
      {state.jobs && (
        <>
          <p class="words" data-count={more ? previewLimit + "+" : String(items.length)}>
            {items.length === 0 ? `No job in ${namespace} matches now.`
              : `${more ? "At least " + previewLimit : items.length} job${items.length === 1 ? "" : "s"} in ${namespace} match${items.length === 1 && !more ? "es" : ""} now`}
          </p>
          {items.length > 0 && (
            <ul class="matches">
              {items.slice(0, 5).map((j) => <li key={j.id}><a href={href("/jobs/" + j.id)}>{j.name}</a></li>)}
              {(items.length > 5 || more) && <li class="muted">and {more ? "more" : items.length - 5 + " more"}</li>}
            </ul>
          )}
        </>
      )}
    </div>
  );
}
