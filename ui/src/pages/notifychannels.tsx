// Notification channels: the list (test, pause, resume, delete) and a new
// channel. A channel's secret (a webhook's signing key, a Slack channel's
// whole URL) is sent once and never shown again: the API answers only
// that one is set.
import { useState } from "preact/hooks";
import { api, ApiError, can, must, type Schemas } from "../api";
import { ErrorBox, Field, NamespaceSelect, Time, useAction } from "../components";
import { href, route, setQuery } from "../router";
import { DeliveryOutcome, Tabs, useChannels, type Channel } from "./notifications";
import { StateOf } from "./notifyrules";

type Form = { namespace: string; name: string; type: Schemas["ChannelType"]; url: string; secret: string };

export function Channels() {
  const ns = route.value.query.get("namespace") ?? "";
  const channels = useChannels(ns);
  const act = useAction();
  const [tested, setTested] = useState<{ channel: Channel; result: Schemas["DeliveryResult"] } | null>(null);
  const [form, setForm] = useState<Form>({ namespace: ns, name: "", type: "webhook", url: "", secret: "" });
  const [created, setCreated] = useState<Channel | null>(null);
  const create = useAction();
  const errs = create.error instanceof ApiError ? create.error.fieldErrors() : {};
  const mayCreate = can("channels.create");
  const patch = (c: Channel, paused: boolean) =>
    act.run(async () => {
      await must(api.PATCH("/v1/notification-channels/{id}", { params: { path: { id: c.id } }, body: { paused } }));
      channels.reload();
    });
  return (
    <>
      <h1>Notification channels</h1>
      <Tabs />
      <p class="muted">
        A channel's secret — a webhook's signing secret, or a Slack channel's whole incoming-webhook URL — is
        stored encrypted and never shown again, here or by the API: the list says only whether one is set, and a
        Slack channel's URL as its scheme and host.
      </p>
      <form class="filters" role="search" aria-label="Find channels" onSubmit={(e) => e.preventDefault()}>
        <div>
          <label for="c-namespace">Namespace</label>
          <NamespaceSelect id="c-namespace" value={ns} onChange={(namespace) => setQuery({ namespace })} />
        </div>
      </form>
      <ErrorBox error={channels.error} />
      <ErrorBox error={act.error} />
      {tested && (
        <div class="notice" role="status">
          Test of channel <strong>{tested.channel.name}</strong>: <DeliveryOutcome r={tested.result} />
        </div>
      )}
      <table aria-busy={channels.loading && !channels.data}>
        <thead>
          <tr>
            <th scope="col">Name</th><th scope="col">Namespace</th><th scope="col">Type</th><th scope="col">URL</th>
            <th scope="col">Secret</th><th scope="col">State</th><th scope="col">Created</th>
            <th scope="col"><span class="sr-only">Actions</span></th>
          </tr>
        </thead>
        <tbody>
          {channels.data?.items.map((c) => (
            <tr key={c.id} data-channel={c.id}>
              <td>{c.name}</td>
              <td>{c.namespace}</td>
              <td>{c.type}</td>
              <td class="mono clip" title={c.url}>{c.url}</td>
              <td>{c.secret_set ? "set (not shown)" : <span class="muted">none</span>}</td>
              <td><StateOf paused={c.paused} /></td>
              <td><Time t={c.created_at} /></td>
              <td class="row-actions">
                {can("channels.test", c.namespace) && (
                  <button class="small" disabled={act.running} onClick={() => act.run(async () => {
                    setTested(null);
                    setTested({ channel: c, result: await must(api.POST("/v1/notification-channels/{id}/test", { params: { path: { id: c.id } } })) });
                  })}>Test</button>
                )}
                {can("channels.update", c.namespace) && (c.paused
                  ? <button class="small" disabled={act.running} onClick={() => patch(c, false)}>Resume</button>
                  : <button class="small" disabled={act.running} onClick={() => patch(c, true)}>Pause</button>)}
                {can("channels.delete", c.namespace) && (
                  <button class="small danger" disabled={act.running} onClick={() => {
                    if (!window.confirm(`Delete channel ${c.namespace}/${c.name}? Rules naming it stop sending to it; its messages not yet delivered fail.`)) return;
                    void act.run(async () => {
                      await must(api.DELETE("/v1/notification-channels/{id}", { params: { path: { id: c.id } } }));
                      channels.reload();
                    });
                  }}>Delete</button>
                )}
              </td>
            </tr>
          ))}
          {channels.data?.items.length === 0 && <tr><td colSpan={8} class="muted">No channel{ns ? " in " + ns : ""}.</td></tr>}
        </tbody>
      </table>
      {mayCreate && (
        <>
          <h2>New channel</h2>
          <form class="job-form" noValidate onSubmit={(e) => {
            e.preventDefault();
            setCreated(null);
            void create.run(async () => {
              const body: Schemas["ChannelCreate"] = {
                namespace: form.namespace || undefined, name: form.name, type: form.type, url: form.url,
                secret: form.type === "webhook" ? form.secret : undefined,
              };
              const c = await must(api.POST("/v1/notification-channels", { body }));
              setCreated(c);
              // The secret went to the server; the page keeps no copy.
              setForm({ ...form, name: "", url: "", secret: "" });
              channels.reload();
            });
          }}>
            <Field label="Namespace" name="namespace" error={errs["namespace"]}>
              <NamespaceSelect value={form.namespace} any={false} onChange={(namespace) => setForm((f) => ({ ...f, namespace }))} />
            </Field>
            <Field label="Name" name="name" error={errs["name"]}>
              <input id="f-name" value={form.name} aria-invalid={!!errs["name"]} onInput={(e) => setForm({ ...form, name: e.currentTarget.value })} />
            </Field>
            <Field label="Type" name="type" error={errs["type"]}>
              <select id="f-type" value={form.type} onChange={(e) => setForm({ ...form, type: e.currentTarget.value as Form["type"], secret: "" })}>
                <option value="webhook">Webhook (signed JSON)</option>
                <option value="slack">Slack incoming webhook</option>
              </select>
            </Field>
            <Field label={form.type === "slack" ? "Incoming webhook URL (secret)" : "URL"} name="url" error={errs["url"]}
              hint={form.type === "slack"
                ? "The whole URL, https://hooks.slack.com/services/…: it is the channel's secret, stored encrypted and shown afterwards as its scheme and host alone."
                : "Where each message is POSTed as JSON."}>
              <input id="f-url" type={form.type === "slack" ? "password" : "url"} autocomplete="off" class="mono" value={form.url}
                aria-invalid={!!errs["url"]} onInput={(e) => setForm({ ...form, url: e.currentTarget.value })} />
            </Field>
            {form.type === "webhook" && (
              <Field label="Signing secret" name="secret" error={errs["secret"]}
                hint="16 to 4096 bytes; each message is signed with it (HMAC-SHA256). Entered once: it is stored encrypted and never shown again.">
                <input id="f-secret" type="password" autocomplete="new-password" value={form.secret} aria-invalid={!!errs["secret"]}
                  onInput={(e) => setForm({ ...form, secret: e.currentTarget.value })} />
              </Field>
            )}
            <ErrorBox error={create.error} />
            <button type="submit" disabled={create.running}>Create channel</button>
          </form>
          {created && (
            <div class="notice" role="status">
              Channel <strong>{created.namespace}/{created.name}</strong> created. Its secret is stored and will not be shown
              again. <a href={href("/notifications/rules/new?namespace=" + encodeURIComponent(created.namespace))}>Make a rule</a> to send to it.
            </div>
          )}
        </>
      )}
    </>
  );
}
