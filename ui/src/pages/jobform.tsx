// Create or edit a job. The schedule is explained in words as it is typed,
// with its next runs from the server's preview (DST changes marked), and
// every error the server finds is shown at its field.
import cronstrue from "cronstrue";
import { useEffect, useState } from "preact/hooks";
import { api, ApiError, can, must, type Job, type Schemas } from "../api";
import { ErrorBox, Field, NamespaceSelect, useAction } from "../components";
import { go, href, route } from "../router";

type Kind = "cron" | "at" | "in" | "now";

type Form = {
  name: string; namespace: string; description: string;
  kind: Kind; cron: string; timezone: string; at: string; in: string;
  handlerType: "http" | "nats" | "custom"; url: string; method: string; subject: string; handlerName: string;
  payload: string; labels: string; maxAttempts: string; timeout: string;
  missed: "" | "skip" | "latest" | "all"; overlap: "" | Schemas["Overlap"];
  calendars: string; onExcluded: Schemas["OnExcluded"];
};

const empty: Form = {
  name: "", namespace: "", description: "", kind: "cron", cron: "0 */5 * * * *",
  timezone: Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC", at: "", in: "",
  handlerType: "http", url: "", method: "POST", subject: "", handlerName: "",
  payload: "", labels: "", maxAttempts: "", timeout: "", missed: "", overlap: "",
  calendars: "", onExcluded: "skip",
};

function fromJob(j: Job): Form {
  const s = j.schedule;
  return {
    ...empty,
    name: j.name, namespace: j.namespace, description: j.description ?? "",
    kind: s.cron ? "cron" : s.at ? "at" : "now",
    cron: s.cron ?? "", timezone: s.timezone ?? "UTC", at: s.at ? toLocalInput(s.at) : "",
    handlerType: j.handler.type, url: j.handler.url ?? "", method: j.handler.method ?? "POST",
    subject: j.handler.subject ?? "", handlerName: j.handler.name ?? "",
    payload: j.payload === undefined || j.payload === null ? "" : JSON.stringify(j.payload, null, 2),
    labels: Object.entries(j.labels ?? {}).map(([k, v]) => `${k}=${v}`).join(", "),
    maxAttempts: j.retry?.max_attempts ? String(j.retry.max_attempts) : "",
    timeout: j.timeout ?? "", missed: j.missed?.policy ?? "", overlap: j.overlap ?? "",
    calendars: (j.calendars ?? []).join(", "), onExcluded: j.on_excluded ?? "skip",
  };
}

function toLocalInput(iso: string): string {
  const d = new Date(iso);
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** explain says a cron expression in words, or "" when it cannot. */
export function explain(cron: string): string {
  const c = cron.trim();
  const every = /^@every\s+(\S+)$/.exec(c);
  if (every) return "Every " + every[1];
  try {
    return cronstrue.toString(c, { use24HourTimeFormat: true, verbose: false });
  } catch {
    return "";
  }
}

/** build turns the form into a job's fields, or field errors found before sending. */
function build(f: Form): { body?: Schemas["JobCreate"]; errors: Record<string, string> } {
  const errors: Record<string, string> = {};
  let payload: Schemas["JobCreate"]["payload"] = undefined;
  if (f.payload.trim()) {
    try {
      payload = JSON.parse(f.payload);
    } catch (e) {
      errors["payload"] = "is not JSON: " + (e as Error).message;
    }
  }
  const labels: Record<string, string> = {};
  for (const part of f.labels.split(",").map((s) => s.trim()).filter(Boolean)) {
    const eq = part.indexOf("=");
    if (eq <= 0) errors["labels"] = `"${part}" is not key=value`;
    else labels[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
  }
  const schedule: Schemas["Schedule"] =
    f.kind === "cron" ? { cron: f.cron, timezone: f.timezone || undefined }
    : f.kind === "at" ? { at: f.at ? new Date(f.at).toISOString() : "" }
    : f.kind === "in" ? { in: f.in }
    : {};
  const handler: Schemas["Handler"] =
    f.handlerType === "http" ? { type: "http", url: f.url, method: f.method || undefined }
    : f.handlerType === "nats" ? { type: "nats", subject: f.subject }
    : { type: "custom", name: f.handlerName };
  let maxAttempts: number | undefined;
  if (f.maxAttempts.trim()) {
    maxAttempts = Number(f.maxAttempts);
    if (!Number.isInteger(maxAttempts)) errors["retry.max_attempts"] = "must be a whole number";
  }
  const calendars = f.calendars.split(",").map((c) => c.trim()).filter((c) => c !== "");
  const body: Schemas["JobCreate"] = {
    name: f.name, namespace: f.namespace || undefined, description: f.description || undefined,
    schedule, handler, payload, labels,
    retry: maxAttempts !== undefined ? { max_attempts: maxAttempts } : undefined,
    timeout: f.timeout || undefined,
    missed: f.missed ? { policy: f.missed } : undefined,
    overlap: f.overlap || undefined,
    calendars: calendars.length ? calendars : undefined,
    on_excluded: calendars.length ? f.onExcluded : undefined,
  };
  return { body: Object.keys(errors).length ? undefined : body, errors };
}

export function JobForm({ id }: { id?: string }) {
  const [f, setF] = useState<Form>({ ...empty, namespace: route.value.query.get("namespace") ?? "" });
  const [job, setJob] = useState<Job | null>(null);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const save = useAction();
  useEffect(() => {
    if (!id) return;
    must(api.GET("/v1/jobs/{id}", { params: { path: { id } } })).then((j) => { setJob(j); setF(fromJob(j)); }, setLoadError);
  }, [id]);
  const set = <K extends keyof Form>(k: K, v: Form[K]) => setF((f) => ({ ...f, [k]: v }));

  const submit = (e: Event) => {
    e.preventDefault();
    const { body, errors: local } = build(f);
    setErrors(local);
    if (!body) return;
    void save.run(async () => {
      try {
        let saved: Job;
        if (id && job) {
          const { name: _n, namespace: _ns, handler, schedule, ...patch } = body;
          // A chain given no schedule stays a chain: an empty schedule
          // would make it a job of its own that never runs.
          const keepChain = job.chain && f.kind === "now";
          // Only if nobody changed the job since the form loaded it: else
          // 412, shown, and nothing is overwritten.
          saved = await must(api.PATCH("/v1/jobs/{id}", {
            params: { path: { id }, header: { "If-Match": `"${job.revision}"` } },
            body: { ...patch, schedule: keepChain ? undefined : schedule, handler: { ...job.handler, ...handler }, description: body.description ?? "",
              // An emptied list removes the job's calendars.
              calendars: body.calendars ?? [] },
          }));
        } else {
          saved = await must(api.POST("/v1/jobs", { body }));
        }
        go("/jobs/" + saved.id);
      } catch (err) {
        if (err instanceof ApiError) setErrors(err.fieldErrors());
        throw err;
      }
    });
  };
  const ns = f.namespace;
  if (id && !job) return <><h1>Edit job</h1><ErrorBox error={loadError} />{!loadError && <p aria-busy="true">Loading…</p>}</>;
  const allowed = id ? can("jobs.update", ns) : can("jobs.create", ns || "default") || can("jobs.create");
  const describedBy = (name: string) => [errors[name] ? "e-" + name : "", "h-" + name].filter(Boolean).join(" ");
  const err = (name: string) => errors[name] ?? Object.entries(errors).find(([k]) => k.startsWith(name + ".") || k.startsWith(name + "["))?.[1];
  return (
    <>
      <h1>{id ? `Edit ${job!.namespace}/${job!.name}` : "New job"}</h1>
      {!allowed && <div class="error forbidden" role="alert">Your role may not {id ? "edit" : "create"} jobs{ns ? " in " + ns : ""}.</div>}
      <form class="job-form" onSubmit={submit} noValidate>
        <fieldset disabled={!allowed || save.running}>
          <legend>Job</legend>
          <Field label="Name" name="name" error={errors["name"]}>
            <input id="f-name" value={f.name} disabled={!!id} aria-invalid={!!errors["name"]} aria-describedby={describedBy("name")}
              onInput={(e) => set("name", e.currentTarget.value)} />
          </Field>
          <Field label="Namespace" name="namespace" error={errors["namespace"]}>
            {id ? <input id="f-namespace" value={f.namespace} disabled />
              : <NamespaceSelect value={f.namespace} any={false} onChange={(v) => set("namespace", v)} />}
          </Field>
          <Field label="Description" name="description" error={errors["description"]}>
            <input id="f-description" value={f.description} onInput={(e) => set("description", e.currentTarget.value)} />
          </Field>
        </fieldset>
        <fieldset disabled={!allowed || save.running}>
          <legend>Schedule</legend>
          {job?.chain && (
            <p class="hint">
              A chain: it has no schedule of its own and runs at its upstreams' scheduled times.
              {f.kind === "now" ? " Pick a schedule to give it one." : " Saved with this schedule, it runs at its own times (and still waits for its upstreams)."}
            </p>
          )}
          <div class="radios" role="radiogroup" aria-label="When">
            {(id ? (["cron", "at"] as Kind[]) : (["cron", "at", "in", "now"] as Kind[])).map((k) => (
              <label key={k}>
                <input type="radio" name="kind" value={k} checked={f.kind === k} onChange={() => set("kind", k)} />
                {{ cron: "On a cron schedule", at: "Once at a time", in: "Once after a delay", now: "Now" }[k]}
              </label>
            ))}
          </div>
          {f.kind === "cron" && (
            <>
              <Field label="Cron expression" name="schedule.cron" error={err("schedule.cron") ?? errors["schedule"]}
                hint={<>Seconds first: <code>0 30 9 * * MON-FRI</code>; or five fields, or <code>@every 90s</code>.</>}>
                <input id="f-schedule.cron" value={f.cron} class="mono" aria-invalid={!!err("schedule.cron")}
                  aria-describedby={describedBy("schedule.cron")} onInput={(e) => set("cron", e.currentTarget.value)} />
              </Field>
              <Field label="Time zone" name="schedule.timezone" error={errors["schedule.timezone"]} hint="IANA name, e.g. Europe/Berlin">
                <input id="f-schedule.timezone" value={f.timezone} aria-invalid={!!errors["schedule.timezone"]}
                  aria-describedby={describedBy("schedule.timezone")} onInput={(e) => set("timezone", e.currentTarget.value)} />
              </Field>
              <SchedulePreview cron={f.cron} timezone={f.timezone} />
            </>
          )}
          {f.kind === "at" && (
            <Field label="Run at (your local time)" name="schedule.at" error={errors["schedule.at"]}>
              <input id="f-schedule.at" type="datetime-local" step="1" value={f.at} onInput={(e) => set("at", e.currentTarget.value)} />
            </Field>
          )}
          {f.kind === "in" && (
            <Field label="Run after" name="schedule.in" error={errors["schedule.in"]} hint="A duration: 90s, 5m, 2h">
              <input id="f-schedule.in" value={f.in} onInput={(e) => set("in", e.currentTarget.value)} />
            </Field>
          )}
        </fieldset>
        <fieldset disabled={!allowed || save.running}>
          <legend>Handler</legend>
          <Field label="Type" name="handler.type" error={errors["handler.type"]}>
            <select id="f-handler.type" value={f.handlerType} onChange={(e) => set("handlerType", e.currentTarget.value as Form["handlerType"])}>
              <option value="http">HTTP request</option>
              <option value="nats">NATS message</option>
              <option value="custom">Custom executor</option>
            </select>
          </Field>
          {f.handlerType === "http" && (
            <>
              <Field label="URL" name="handler.url" error={errors["handler.url"]}>
                <input id="f-handler.url" type="url" value={f.url} aria-invalid={!!errors["handler.url"]}
                  onInput={(e) => set("url", e.currentTarget.value)} />
              </Field>
              <Field label="Method" name="handler.method" error={errors["handler.method"]}>
                <input id="f-handler.method" value={f.method} onInput={(e) => set("method", e.currentTarget.value)} />
              </Field>
            </>
          )}
          {f.handlerType === "nats" && (
            <Field label="Subject" name="handler.subject" error={errors["handler.subject"]}>
              <input id="f-handler.subject" value={f.subject} onInput={(e) => set("subject", e.currentTarget.value)} />
            </Field>
          )}
          {f.handlerType === "custom" && (
            <Field label="Handler name" name="handler.name" error={errors["handler.name"]}>
              <input id="f-handler.name" value={f.handlerName} onInput={(e) => set("handlerName", e.currentTarget.value)} />
            </Field>
          )}
          <Field label="Payload (JSON)" name="payload" error={errors["payload"]}>
            <textarea id="f-payload" class="mono" rows={4} value={f.payload} onInput={(e) => set("payload", e.currentTarget.value)} />
          </Field>
        </fieldset>
        <fieldset disabled={!allowed || save.running}>
          <legend>Policies</legend>
          <Field label="Labels" name="labels" error={err("labels")} hint="key=value, comma-separated">
            <input id="f-labels" value={f.labels} onInput={(e) => set("labels", e.currentTarget.value)} />
          </Field>
          <Field label="Attempts per execution" name="retry.max_attempts" error={err("retry")}>
            <input id="f-retry.max_attempts" inputMode="numeric" value={f.maxAttempts} placeholder="cluster default"
              onInput={(e) => set("maxAttempts", e.currentTarget.value)} />
          </Field>
          <Field label="Timeout per attempt" name="timeout" error={errors["timeout"]} hint="A duration, e.g. 30s">
            <input id="f-timeout" value={f.timeout} onInput={(e) => set("timeout", e.currentTarget.value)} />
          </Field>
          <Field label="Missed runs" name="missed.policy" error={err("missed")}>
            <select id="f-missed.policy" value={f.missed} onChange={(e) => set("missed", e.currentTarget.value as Form["missed"])}>
              <option value="">cluster default</option>
              <option value="skip">skip them</option>
              <option value="latest">run the latest once</option>
              <option value="all">run them all</option>
            </select>
          </Field>
          <Field label="When a run is still going" name="overlap" error={errors["overlap"]}>
            <select id="f-overlap" value={f.overlap} onChange={(e) => set("overlap", e.currentTarget.value as Form["overlap"])}>
              <option value="">cluster default</option>
              <option value="allow">run anyway</option>
              <option value="skip">skip the new run</option>
              <option value="buffer_one">queue one run</option>
              <option value="cancel_running">cancel the running one</option>
            </select>
          </Field>
          <Field label="Calendars" name="calendars" error={err("calendars")} hint="names of the namespace's calendars, comma-separated; runs they exclude do not fire">
            <input id="f-calendars" value={f.calendars} onInput={(e) => set("calendars", e.currentTarget.value)} />
          </Field>
          {f.calendars.trim() !== "" && (
            <Field label="A run the calendars exclude" name="on_excluded" error={errors["on_excluded"]}>
              <select id="f-on_excluded" value={f.onExcluded} onChange={(e) => set("onExcluded", e.currentTarget.value as Form["onExcluded"])}>
                <option value="skip">skip it</option>
                <option value="next_allowed">run once at the first allowed time</option>
              </select>
            </Field>
          )}
        </fieldset>
        <ErrorBox error={save.error} />
        <div class="actions">
          <button type="submit" disabled={!allowed || save.running}>{id ? "Save" : "Create job"}</button>
          <a href={href(id ? "/jobs/" + id : "/jobs")}>Cancel</a>
        </div>
      </form>
    </>
  );
}

/** SchedulePreview explains a cron expression and lists its next runs. */
function SchedulePreview({ cron, timezone }: { cron: string; timezone: string }) {
  const [preview, setPreview] = useState<Schemas["Preview"] | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    if (!cron.trim()) return;
    const t = setTimeout(() => {
      must(api.POST("/v1/schedules:preview", { body: { schedule: { cron, timezone: timezone || undefined }, count: 5 } })).then(
        (p) => { setPreview(p); setError(null); },
        (e) => { setPreview(null); setError(e); },
      );
    }, 250);
    return () => clearTimeout(t);
  }, [cron, timezone]);
  const words = explain(cron);
  return (
    <div class="preview" aria-live="polite">
      {words && <p class="words">{words}{timezone ? ` (${timezone})` : ""}</p>}
      {error instanceof ApiError && error.status === 400
        ? <p class="muted">No preview until the schedule is valid.</p>
        : <ErrorBox error={error} />}
      {preview && (
        <>
          <h3>Next runs</h3>
          <ol class="fires">
            {preview.fires.map((p) => (
              <li key={p.at}>
                <time dateTime={p.at}>{p.local}</time>
                {p.dst && <span class={"dst dst-" + p.dst} title={p.note}> DST: {p.dst === "moved" ? "moved" : "repeated hour"}</span>}
                {p.note && <span class="muted"> {p.note}</span>}
              </li>
            ))}
          </ol>
        </>
      )}
    </div>
  );
}
