// The TypeScript SDK's executor for tock's conformance kit (tockd
// conformance): serves TOCK_CONFORMANCE_HANDLER on TOCK_NATS_URL and does
// what each execution's payload asks under "conformance".
import { connect } from "@nats-io/transport-node";
import { Permanent, Worker, type Context, type Execution } from "../src/index.js";

interface Instruction {
  do: "succeed" | "fail" | "work";
  output?: string;
  fail_attempts?: number;
  work_ms?: number;
  echo_id?: boolean;
  log?: string[];
}

const url = process.env.TOCK_NATS_URL;
const handler = process.env.TOCK_CONFORMANCE_HANDLER;
if (!url || !handler) {
  console.error("TOCK_NATS_URL and TOCK_CONFORMANCE_HANDLER must be set");
  process.exit(1);
}
const nc = await connect({ servers: url, name: "tock conformance executor (TypeScript)" });
const w = new Worker({ nats: nc });
w.handle(handler, async (ctx: Context, e: Execution) => {
  const ins = (e.payload as { conformance?: Instruction } | undefined)?.conformance;
  if (!ins) throw new Permanent("no conformance instruction in the payload");
  for (const l of ins.log ?? []) ctx.log(l);
  const out = ins.echo_id ? e.execution_id : (ins.output ?? "");
  switch (ins.do) {
    case "succeed":
      return out;
    case "fail":
      if (ctx.attempt <= (ins.fail_attempts ?? 0)) throw new Error("conformance: asked to fail");
      return out;
    case "work":
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(resolve, ins.work_ms ?? 0);
        ctx.signal.addEventListener("abort", () => {
          clearTimeout(t);
          reject(ctx.signal.reason);
        });
      });
      return out;
  }
  throw new Permanent(`unknown instruction ${String(ins.do)}`);
});
const stop = new AbortController();
for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, () => stop.abort());
await w.run(stop.signal);
await nc.drain();
