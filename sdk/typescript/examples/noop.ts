// A no-op executor for throughput measurements (docs/bench.md): serves
// TOCK_HANDLER on TOCK_NATS_URL with a handler that returns at once, and
// prints how many attempts it ran and its CPU time when it stops.
import { connect } from "@nats-io/transport-node";
import { Worker } from "../src/index.js";

const nc = await connect({ servers: process.env.TOCK_NATS_URL ?? "nats://127.0.0.1:4222" });
const w = new Worker({ nats: nc, concurrency: Number(process.env.TOCK_CONCURRENCY ?? 256) });
let n = 0;
w.handle(process.env.TOCK_HANDLER ?? "noop", async () => {
  n++;
  return "";
});
const stop = new AbortController();
for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, () => stop.abort());
await w.run(stop.signal);
const u = process.cpuUsage();
console.log(JSON.stringify({ attempts: n, cpu_s: (u.user + u.system) / 1e6 }));
await nc.drain();
