// Keys (admin): the API keys, a new key (its secret shown once), deletion.
import { useState } from "preact/hooks";
import { api, ApiError, must, type Schemas } from "../api";
import { ErrorBox, Field, Time, useAction, useLoad } from "../components";

export function Keys() {
  const keys = useLoad(() => must(api.GET("/v1/keys")), []);
  const [form, setForm] = useState({ namespace: "*", role: "reader" as Schemas["Role"], name: "", expires_in: "" });
  const [created, setCreated] = useState<Schemas["KeyCreated"] | null>(null);
  const act = useAction();
  const errs = act.error instanceof ApiError ? act.error.fieldErrors() : {};
  return (
    <>
      <h1>API keys</h1>
      <ErrorBox error={keys.error} />
      <table aria-busy={keys.loading}>
        <thead>
          <tr><th scope="col">Key</th><th scope="col">Name</th><th scope="col">Namespace</th><th scope="col">Role</th><th scope="col">Created</th><th scope="col">Expires</th><th scope="col"><span class="sr-only">Actions</span></th></tr>
        </thead>
        <tbody>
          {keys.data?.items.map((k) => (
            <tr key={k.id}>
              <td class="mono">{k.id}</td><td>{k.name}</td><td>{k.namespace}</td><td>{k.role}</td>
              <td><Time t={k.created_at} /> by {k.created_by}</td><td><Time t={k.expires_at} /></td>
              <td>
                <button class="small danger" onClick={() => {
                  if (!window.confirm(`Delete key ${k.id} (${k.name})? Clients using it are refused at once.`)) return;
                  void act.run(async () => { await must(api.DELETE("/v1/keys/{key_id}", { params: { path: { key_id: k.id } } })); keys.reload(); });
                }}>Delete</button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <h2>New key</h2>
      <form class="job-form" onSubmit={(e) => {
        e.preventDefault();
        void act.run(async () => {
          setCreated(await must(api.POST("/v1/keys", { body: { ...form, expires_in: form.expires_in || undefined } })));
          keys.reload();
        });
      }}>
        <Field label="Namespace" name="namespace" error={errs["namespace"]} hint="* for every namespace">
          <input id="f-namespace" value={form.namespace} onInput={(e) => setForm({ ...form, namespace: e.currentTarget.value })} />
        </Field>
        <Field label="Role" name="role" error={errs["role"]}>
          <select id="f-role" value={form.role} onChange={(e) => setForm({ ...form, role: e.currentTarget.value as Schemas["Role"] })}>
            {["reader", "operator", "editor", "admin"].map((r) => <option key={r}>{r}</option>)}
          </select>
        </Field>
        <Field label="Name" name="name" error={errs["name"]}>
          <input id="f-name" value={form.name} onInput={(e) => setForm({ ...form, name: e.currentTarget.value })} />
        </Field>
        <Field label="Expires in" name="expires_in" error={errs["expires_in"]} hint="A duration such as 720h; empty for never">
          <input id="f-expires_in" value={form.expires_in} onInput={(e) => setForm({ ...form, expires_in: e.currentTarget.value })} />
        </Field>
        <ErrorBox error={act.error} />
        <button type="submit" disabled={act.running}>Create key</button>
      </form>
      {created && (
        <div class="notice" role="status">
          Key created. Copy its secret now: it is not shown again.
          <pre class="mono">{created.key}</pre>
        </div>
      )}
      <NamespaceHint />
    </>
  );
}

function NamespaceHint() {
  return <p class="muted">Roles: reader sees; operator also runs, pauses, cancels and re-drives; editor also creates, edits and deletes jobs; admin also manages keys and sees the cluster.</p>;
}
