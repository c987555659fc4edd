// tock's web dashboard. The app is an API client like tockctl: it sends the
// user's key or token, sees what the role allows, and hides the actions the
// role does not allow (GET /v1/whoami says which).
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, me, must, setKey, signInNeeded, storedKey } from "./api";
import { ErrorBox, Frame } from "./components";
import { onLink, route } from "./router";
import { Overview } from "./pages/overview";
import { Jobs } from "./pages/jobs";
import { JobForm } from "./pages/jobform";
import { JobDetail } from "./pages/job";
import { Executions } from "./pages/executions";
import { ExecutionDetail } from "./pages/execution";
import { Cluster } from "./pages/cluster";
import { Handlers } from "./pages/handlers";
import { Keys } from "./pages/keys";
import { Audit } from "./pages/audit";
import { Notifications } from "./pages/notifications";
import { RuleForm, Rules } from "./pages/notifyrules";
import { Channels } from "./pages/notifychannels";
import { CalendarDetail, Calendars } from "./pages/calendars";
import { Concurrency } from "./pages/concurrency";

function Page() {
  const { path } = route.value;
  const seg = path.split("/").filter(Boolean);
  let page;
  let title = "Overview";
  if (seg.length === 0) page = <Overview />;
  else if (seg[0] === "jobs" && seg.length === 1) { page = <Jobs />; title = "Jobs"; }
  else if (seg[0] === "jobs" && seg[1] === "new") { page = <JobForm />; title = "New job"; }
  else if (seg[0] === "jobs" && seg[2] === "edit") { page = <JobForm id={seg[1]} />; title = "Edit job"; }
  else if (seg[0] === "jobs") { page = <JobDetail id={seg[1]} />; title = "Job"; }
  else if (seg[0] === "executions" && seg.length === 1) { page = <Executions />; title = "Executions"; }
  else if (seg[0] === "executions") { page = <ExecutionDetail id={seg[1]} />; title = "Execution"; }
  else if (seg[0] === "cluster") { page = <Cluster />; title = "Cluster"; }
  else if (seg[0] === "handlers") { page = <Handlers />; title = "Handlers"; }
  else if (seg[0] === "concurrency") { page = <Concurrency />; title = "Waiting on"; }
  else if (seg[0] === "calendars" && seg.length === 1) { page = <Calendars />; title = "Calendars"; }
  else if (seg[0] === "calendars") { page = <CalendarDetail name={decodeURIComponent(seg[1])} />; title = "Calendar"; }
  else if (seg[0] === "keys") { page = <Keys />; title = "Keys"; }
  else if (seg[0] === "audit") { page = <Audit />; title = "Audit trail"; }
  else if (seg[0] === "notifications" && seg.length === 1) { page = <Notifications />; title = "Notifications"; }
  else if (seg[0] === "notifications" && seg[1] === "rules" && seg.length === 2) { page = <Rules />; title = "Notification rules"; }
  else if (seg[0] === "notifications" && seg[1] === "rules" && seg[2] === "new") { page = <RuleForm />; title = "New rule"; }
  else if (seg[0] === "notifications" && seg[1] === "rules") { page = <RuleForm key={seg[2]} id={seg[2]} />; title = "Edit rule"; }
  else if (seg[0] === "notifications" && seg[1] === "channels") { page = <Channels />; title = "Notification channels"; }
  else { page = <h1>Not found</h1>; title = "Not found"; }
  useEffect(() => { document.title = title + " · tock"; }, [title]);
  return <Frame>{page}</Frame>;
}

function SignIn({ error }: { error?: unknown }) {
  const [key, setValue] = useState("");
  return (
    <main id="main" class="signin">
      <h1>Sign in to tock</h1>
      <p>Paste an API key (<code>tock_…</code>) or a token from your identity provider. It is kept in this tab only.</p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          setKey(key.trim());
          signInNeeded.value = false;
          me.value = null;
        }}
      >
        <label for="key">API key or token</label>
        <input id="key" type="password" autocomplete="off" value={key} onInput={(e) => setValue(e.currentTarget.value)} required />
        <button type="submit">Sign in</button>
      </form>
      <ErrorBox error={error} />
    </main>
  );
}

function App() {
  const [error, setError] = useState<unknown>(null);
  const needSignIn = signInNeeded.value;
  useEffect(() => {
    if (needSignIn || me.value) return;
    must(api.GET("/v1/whoami")).then(
      (w) => { me.value = w; setError(null); },
      (e) => {
        setError(storedKey() ? e : null);
        signInNeeded.value = true;
      },
    );
  }, [needSignIn, me.value]);
  if (needSignIn) return <SignIn error={error} />;
  if (!me.value) return <main id="main" class="loading" aria-busy="true">Loading…</main>;
  return <Page />;
}

document.addEventListener("click", onLink);
render(<App />, document.getElementById("app")!);
