// Cluster (admin): scheduler nodes, and every bucket with its owner and
// epoch as etcd holds them and as Postgres last recorded them.
import { api, must } from "../api";
import { ErrorBox, Time, useLoad } from "../components";
import { NodesTable } from "./overview";

export function Cluster() {
  const nodes = useLoad(() => must(api.GET("/v1/nodes")), []);
  const buckets = useLoad(() => must(api.GET("/v1/buckets")), []);
  const items = buckets.data?.items ?? [];
  const unowned = items.filter((b) => !b.owner).length;
  const moving = items.filter((b) => b.owner && b.owner !== b.recorded_owner).length;
  return (
    <>
      <h1>Cluster</h1>
      <ErrorBox error={nodes.error} />
      {nodes.data && <NodesTable nodes={nodes.data.items} />}
      <section aria-labelledby="buckets">
        <h2 id="buckets">Buckets</h2>
        <ErrorBox error={buckets.error} />
        {buckets.data && (
          <p>
            {items.length} buckets; {unowned} without an owner; {moving} whose owner has not yet taken them over.
          </p>
        )}
        <table aria-busy={buckets.loading}>
          <thead>
            <tr>
              <th scope="col">Bucket</th><th scope="col">Owner (etcd)</th><th scope="col">Epoch</th>
              <th scope="col">Recorded owner (Postgres)</th><th scope="col">Recorded epoch</th>
              <th scope="col">Jobs</th><th scope="col">Active</th><th scope="col">Next due</th>
            </tr>
          </thead>
          <tbody>
            {items.map((b) => (
              <tr key={b.bucket} class={b.owner ? "" : "warn"}>
                <td>{b.bucket}</td><td>{b.owner || "—"}</td><td>{b.epoch}</td>
                <td>{b.recorded_owner || "—"}</td><td>{b.recorded_epoch}</td>
                <td>{b.jobs}</td><td>{b.active_jobs}</td><td><Time t={b.next_due} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>
    </>
  );
}
