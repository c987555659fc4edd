// The TypeScript twin of examples/custom-executor: serves one custom
// handler (default "send-email", or TOCK_HANDLER) on TOCK_NATS_URL by
// logging each execution and returning an output, until SIGINT or
// SIGTERM. After `make dev` and `source .dev/env`:
//
//	cd sdk/typescript && npm ci && npm run build
//	node dist/examples/custom-executor.js
import { connect } from "@nats-io/transport-node";
import { Worker } from "../src/index.js";

const url = process.env.TOCK_NATS_URL ?? "nats://127.0.0.1:4222";
const handler = process.env.TOCK_HANDLER ?? "send-email";
const nc = await connect({ servers: url, name: `tock custom executor ${handler} (TypeScript)` });
const w = new Worker({ nats: nc, concurrency: 4 });
w.handle(handler, async (ctx, e) => {
  console.log(`execution ${e.execution_id} of ${e.namespace}/${e.job_name} (attempt ${ctx.attempt}): ${JSON.stringify(e.payload)}`);
  ctx.log(`sending ${JSON.stringify(e.payload)}`); // the attempt's log in tock
  if (ctx.signal.aborted) throw ctx.signal.reason; // cancelled, timed out or shutting down
  return `handled by ${w.id}`;
});
const stop = new AbortController();
for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, () => stop.abort());
console.log(`serving ${handler} on ${url} as ${w.id}`);
await w.run(stop.signal);
await nc.drain();
