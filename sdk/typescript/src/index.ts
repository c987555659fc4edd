// tock's TypeScript SDK for custom executors: a Worker serves custom
// handlers over NATS JetStream, speaking tock's wire protocol
// (docs/wire-protocol.md): it pulls executions from the handler's three
// priority consumers, reports each attempt's start, heartbeats and end as
// events, keeps its message with in-progress acks, stops an attempt on
// cancellation and at the job's timeout, computes retries' backoff as
// tock does, answers a redelivered message of an attempt it already
// reported from memory, writes the attempt's log, and on stop lets
// running attempts finish (then hands them back).
import { setMaxListeners } from "node:events";
import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import type { NatsConnection } from "@nats-io/transport-node";
import {
  AckPolicy,
  jetstream,
  jetstreamManager,
  type JetStreamClient,
  type JsMsg,
} from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";

/** The streams, subjects and buckets of the wire protocol. */
export const ExecStream = "TOCK_EXEC";
export const EventSubjectPrefix = "tock.events.";
export const LogSubject = "tock.logs.batch";
export const CancelBucket = "TOCK_CANCELLED";
/** Each executor's view of each handler it serves (GET /v1/handlers, the dashboard's Handlers page). */
export const HandlerBucket = "TOCK_HANDLERS";
/** Every how long an executor writes its handlers' states (they expire a minute after the last write). */
export const HandlerStateEveryMS = 10_000;
/** This SDK's name and version, in its handlers' states. */
export const SDKVersion = "@tock-sched/executor 0.1.0";
export const Priorities = ["high", "normal", "low"] as const;
export type Priority = (typeof Priorities)[number];
/** How long an executor may stay silent before its message is delivered again. */
export const AckWaitMS = 30_000;
/** Outputs and errors are cut to this many bytes. */
export const MaxOutputBytes = 4096;

/** A job's retry policy, as an execution carries it. */
export interface RetryPolicy {
  max_attempts?: number;
  initial_backoff?: string;
  max_backoff?: string;
  multiplier?: number;
  jitter?: "full" | "equal" | "none";
}

/** An execution, as its message carries it (wire.Execution). */
export interface Execution {
  execution_id: string;
  job_id: string;
  namespace: string;
  job_name: string;
  scheduled_for: string;
  handler: { type: string; name?: string };
  payload?: unknown;
  timeout_ms?: number;
  retry?: RetryPolicy;
  priority?: Priority;
  attempt_base?: number;
  series_base?: number;
  dispatch?: number;
}

/** What a handler gets beside the execution. */
export interface Context {
  /** Aborted when the execution is cancelled, at the job's timeout, and at shutdown. */
  signal: AbortSignal;
  /** The attempt number, from 1, over the execution's whole life. */
  attempt: number;
  /** Writes a line (or text) to the attempt's log in tock (stdout). */
  log(text: string): void;
}

/** A handler: the output to record, or a thrown error (retried unless Permanent). */
export type Handler = (ctx: Context, execution: Execution) => Promise<string>;

/** An error that ends the execution now, without a retry. */
export class Permanent extends Error {
  constructor(message: string) {
    super(message);
    this.name = "Permanent";
  }
}

export interface WorkerOptions {
  nats: NatsConnection;
  /** Names this process in events; default hostname-random. */
  executorId?: string;
  /** Attempts run at once, over all queues; default 16. */
  concurrency?: number;
  /** Every how long a running attempt reports a heartbeat (and keeps its message); default 10 s. */
  heartbeatIntervalMS?: number;
  /** How long stop lets running attempts finish before it interrupts them; default 10 s. */
  shutdownTimeoutMS?: number;
  /**
   * An attempt still running after this long reports its start; a quicker
   * one reports it with its end (started_at), halving its events. Default
   * 200 ms, as the Go SDK's.
   */
  startReportDelayMS?: number;
}

interface Reported {
  subject: string;
  body: Uint8Array;
  msgId: string;
  terminate: boolean;
  until: number;
}

/** Parses a Go duration ("1s", "1m30s", "250ms"); undefined when it is not one. */
export function parseDuration(s: string | undefined): number | undefined {
  if (!s) return undefined;
  const units: Record<string, number> = { ns: 1e-6, us: 1e-3, "µs": 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0;
  let pos = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(s)) !== null) {
    total += parseFloat(m[1]) * units[m[2]];
    pos = re.lastIndex;
  }
  return pos === s.length && pos > 0 ? total : undefined;
}

/** The delay before retry number attempt (from 1) of a series, as tock computes it (domain.RetryPolicy.Delay). */
export function retryDelayMS(p: RetryPolicy | undefined, attempt: number, random = Math.random()): number {
  const initial = parseDuration(p?.initial_backoff) ?? 1000;
  const maxB = Math.max(parseDuration(p?.max_backoff) ?? 300_000, initial);
  const mult = p?.multiplier && p.multiplier >= 1 ? p.multiplier : 2;
  let d = Math.min(initial * Math.pow(mult, Math.max(attempt, 1) - 1), maxB);
  switch (p?.jitter) {
    case "none":
      break;
    case "equal":
      d = d / 2 + (random * d) / 2;
      break;
    default:
      d = random * d;
  }
  return Math.floor(d);
}

function cut(s: string): string {
  const b = Buffer.from(s, "utf8");
  return b.length <= MaxOutputBytes ? s : b.subarray(0, MaxOutputBytes).toString("utf8");
}

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A Worker serves custom handlers: see the module comment. */
export class Worker {
  readonly id: string;
  private readonly nc: NatsConnection;
  private readonly js: JetStreamClient;
  private readonly handlers = new Map<string, Handler>();
  private readonly concurrency: number;
  private readonly heartbeatMS: number;
  private readonly shutdownMS: number;
  private readonly startDelayMS: number;
  private running = 0;
  private waiters: Array<() => void> = [];
  private readonly attempts = new Map<string, AbortController>();
  private readonly cancelled = new Set<string>();
  private readonly journal = new Map<string, Reported>();
  private readonly shutdown = new AbortController();
  private readonly inFlight = new Map<string, number>();
  private readonly started = new Date().toISOString();

  constructor(opts: WorkerOptions) {
    this.nc = opts.nats;
    this.js = jetstream(opts.nats);
    this.id = opts.executorId ?? `${hostname()}-${randomUUID().slice(0, 8)}`;
    this.concurrency = opts.concurrency ?? 16;
    this.heartbeatMS = opts.heartbeatIntervalMS ?? 10_000;
    this.shutdownMS = opts.shutdownTimeoutMS ?? 10_000;
    this.startDelayMS = opts.startReportDelayMS ?? 200;
    // Every running attempt listens for the shutdown.
    setMaxListeners(0, this.shutdown.signal);
  }

  /** Serves queue (a custom handler's name) with fn. */
  handle(queue: string, fn: Handler): void {
    this.handlers.set(queue, fn);
  }

  /** Serves until signal aborts, then stops as WorkerOptions.shutdownTimeoutMS says. */
  async run(signal: AbortSignal): Promise<void> {
    const jsm = await jetstreamManager(this.nc);
    const kv = await new Kvm(this.nc).open(CancelBucket);
    const watch = await kv.watch({ key: ">" });
    (async () => {
      for await (const e of watch) {
        if (e.operation === "PUT") {
          this.cancelled.add(e.key);
          this.attempts.get(e.key)?.abort(new Error("cancelled"));
        } else {
          this.cancelled.delete(e.key);
        }
      }
    })().catch(() => {});
    const loops: Promise<void>[] = [];
    const stop = new AbortController();
    for (const [queue, fn] of this.handlers) {
      for (const p of Priorities) {
        const name = `tock_${queue}_${p}`;
        await jsm.consumers
          .add(ExecStream, {
            durable_name: name,
            filter_subject: `tock.exec.${queue}.${p}`,
            ack_policy: AckPolicy.Explicit,
            ack_wait: AckWaitMS * 1_000_000,
            max_deliver: -1,
            max_ack_pending: 1000,
          })
          .catch(async () => {
            await jsm.consumers.info(ExecStream, name); // made by another process
          });
        const c = await this.js.consumers.get(ExecStream, name);
        const msgs = await c.consume({ max_messages: this.concurrency, expires: 5_000 });
        stop.signal.addEventListener("abort", () => void msgs.stop());
        loops.push(
          (async () => {
            for await (const m of msgs) {
              await this.slot();
              if (stop.signal.aborted) {
                this.free();
                m.nak(); // not ours to run any more
                continue;
              }
              this.inFlight.set(queue, (this.inFlight.get(queue) ?? 0) + 1);
              void this.deliver(queue, fn, m).finally(() => {
                this.inFlight.set(queue, (this.inFlight.get(queue) ?? 1) - 1);
                this.free();
              });
            }
          })(),
        );
      }
    }
    const janitor = setInterval(() => {
      const now = Date.now();
      for (const [k, r] of this.journal) if (r.until < now) this.journal.delete(k);
    }, 30_000);
    // What it serves, for tock's API: this SDK has no circuit breaker, so
    // each handler's is always closed; its limit is the concurrency.
    const states = await new Kvm(this.nc).open(HandlerBucket);
    const writeStates = async () => {
      for (const queue of this.handlers.keys()) {
        await states.put(this.stateKey(queue), JSON.stringify({
          handler: queue, queue, executor_id: this.id, breaker: "closed", since: this.started,
          requests: 0, failures: 0, in_flight: this.inFlight.get(queue) ?? 0, limit: this.concurrency,
          updated_at: new Date().toISOString(), version: SDKVersion,
        })).catch(() => {});
      }
    };
    await writeStates();
    const stateTimer = setInterval(() => void writeStates(), HandlerStateEveryMS);
    await new Promise<void>((resolve) => {
      if (signal.aborted) resolve();
      signal.addEventListener("abort", () => resolve(), { once: true });
    });
    stop.abort();
    await Promise.allSettled(loops);
    // Running attempts may finish within the shutdown grace; then they are interrupted.
    const deadline = setTimeout(() => this.shutdown.abort(new Error("executor shutdown")), this.shutdownMS);
    while (this.running > 0) await new Promise((r) => setTimeout(r, 50));
    clearTimeout(deadline);
    clearInterval(janitor);
    clearInterval(stateTimer);
    for (const queue of this.handlers.keys()) await states.delete(this.stateKey(queue)).catch(() => {});
    watch.stop();
  }

  /** The key of queue's state in HandlerBucket: handler and executor id, base64url each. */
  private stateKey(queue: string): string {
    return Buffer.from(queue).toString("base64url") + "." + Buffer.from(this.id).toString("base64url");
  }

  private async slot(): Promise<void> {
    if (this.running < this.concurrency) {
      this.running++;
      return;
    }
    await new Promise<void>((r) => this.waiters.push(r));
    this.running++;
  }

  private free(): void {
    this.running--;
    this.waiters.shift()?.();
  }

  private async publish(type: string, e: Execution, attempt: number, fields: Record<string, unknown> = {}, seq = 0): Promise<Reported> {
    const dispatch = e.dispatch ?? 0;
    const body = enc.encode(
      JSON.stringify({
        type,
        execution_id: e.execution_id,
        scheduled_for: e.scheduled_for,
        attempt,
        dispatch,
        executor_id: this.id,
        at: new Date().toISOString(),
        namespace: e.namespace,
        job_id: e.job_id,
        ...fields,
        ...(seq ? { seq } : {}),
      }),
    );
    let msgId = `${e.execution_id}:${dispatch}:${attempt}:${type}`;
    if (type === "heartbeat") msgId += `:${seq}`;
    const r: Reported = { subject: EventSubjectPrefix + type, body, msgId, terminate: false, until: Date.now() + 120_000 };
    await this.send(r);
    return r;
  }

  private async send(r: Reported): Promise<void> {
    for (let i = 0; ; i++) {
      try {
        await this.js.publish(r.subject, r.body, { msgID: r.msgId });
        return;
      } catch (err) {
        if (i >= 20) throw err;
        await new Promise((res) => setTimeout(res, Math.min(100 * 2 ** i, 2000)));
      }
    }
  }

  private async deliver(queue: string, fn: Handler, m: JsMsg): Promise<void> {
    let e: Execution;
    try {
      e = JSON.parse(dec.decode(m.data)) as Execution;
      if (typeof e.execution_id !== "string" || !e.execution_id || typeof e.scheduled_for !== "string") throw new Error("not an execution");
    } catch {
      m.term("not an execution");
      return;
    }
    const attempt = (e.attempt_base ?? 0) + m.info.deliveryCount;
    const key = `${e.execution_id}:${e.dispatch ?? 0}:${attempt}`;
    const done = this.journal.get(key);
    if (done) {
      // Delivered again after its end was reported (a lost ack): report it again, the same.
      await this.send(done);
      if (done.terminate) m.term();
      else m.ack();
      return;
    }
    if (this.cancelled.has(e.execution_id)) {
      await this.publish("cancelled", e, attempt);
      m.term();
      return;
    }
    const started = new Date().toISOString();
    let startReported: Promise<unknown> | undefined;
    const startTimer = setTimeout(() => {
      startReported = this.publish("started", e, attempt).catch(() => {});
    }, this.startDelayMS);
    const ac = new AbortController();
    this.attempts.set(e.execution_id, ac);
    let timedOut = false;
    const timer = e.timeout_ms
      ? setTimeout(() => {
          timedOut = true;
          ac.abort(new Error(`timed out after ${e.timeout_ms} ms`));
        }, e.timeout_ms)
      : undefined;
    const onShutdown = () => ac.abort(this.shutdown.signal.reason);
    this.shutdown.signal.addEventListener("abort", onShutdown);
    let seq = 0;
    const beat = setInterval(() => {
      m.working();
      void this.publish("heartbeat", e, attempt, {}, ++seq).catch(() => {});
    }, this.heartbeatMS);
    const log = new AttemptLog(this, e, attempt);
    let out: string | undefined;
    let err: unknown;
    try {
      out = await Promise.race([
        fn({ signal: ac.signal, attempt, log: (t) => log.write(t) }, e),
        new Promise<never>((_, reject) => ac.signal.addEventListener("abort", () => reject(ac.signal.reason), { once: true })),
      ]);
    } catch (x) {
      err = x;
    } finally {
      clearTimeout(startTimer);
      clearInterval(beat);
      clearTimeout(timer);
      this.shutdown.signal.removeEventListener("abort", onShutdown);
      this.attempts.delete(e.execution_id);
    }
    await log.end();
    await startReported; // a start report goes before the end's
    let r: Reported;
    if (err === undefined) {
      r = await this.publish("succeeded", e, attempt, { output: cut(out ?? ""), started_at: started });
      m.ack();
    } else if (this.cancelled.has(e.execution_id) && !timedOut) {
      r = await this.publish("cancelled", e, attempt, { started_at: started });
      r.terminate = true;
      m.term();
    } else if (this.shutdown.signal.aborted && !timedOut) {
      // Not the job's fault: tock publishes it again at once.
      await this.publish("failed", e, attempt, { error: cut(`interrupted by executor shutdown: ${String(err)}`), started_at: started });
      m.ack();
      return;
    } else {
      const final = err instanceof Permanent || attempt - (e.series_base ?? 0) >= Math.max(e.retry?.max_attempts ?? 1, 1);
      const retry = final ? 0 : retryDelayMS(e.retry, attempt - (e.series_base ?? 0));
      const message = err instanceof Error ? err.message : String(err);
      r = await this.publish("failed", e, attempt, {
        error: cut(message),
        final,
        timed_out: timedOut,
        retry_in_ms: retry,
        started_at: started,
      });
      r.terminate = final;
      if (final) m.term();
      else m.ack();
    }
    this.journal.set(key, r);
  }

  /** Publishes log chunks (used by AttemptLog). */
  async publishLog(chunk: Record<string, unknown>): Promise<void> {
    await this.js.publish(LogSubject, enc.encode(JSON.stringify([chunk])), { msgID: randomUUID() });
  }
}

/** An attempt's log: lines go out in chunks, in order (wire.LogChunk). */
class AttemptLog {
  private seq = 0;
  private offset = 0;
  private pending: Array<{ at: string; text: string }> = [];
  private flushing: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly w: Worker,
    private readonly e: Execution,
    private readonly attempt: number,
  ) {}

  write(text: string): void {
    this.pending.push({ at: new Date().toISOString(), text: text.endsWith("\n") ? text : text + "\n" });
    this.timer ??= setTimeout(() => this.flush(false), 200);
  }

  private flush(end: boolean): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const lines = this.pending;
    this.pending = [];
    if (lines.length === 0 && !end) return this.flushing;
    const seq = ++this.seq;
    const offset = this.offset;
    for (const l of lines) this.offset += Buffer.byteLength(l.text);
    const chunk = {
      execution_id: this.e.execution_id,
      scheduled_for: this.e.scheduled_for,
      attempt: this.attempt,
      dispatch: this.e.dispatch ?? 0,
      namespace: this.e.namespace,
      seq,
      stream: "stdout",
      lines,
      offset,
      ...(end ? { end: true } : {}),
    };
    this.flushing = this.flushing.then(() => this.w.publishLog(chunk).catch(() => {}));
    return this.flushing;
  }

  /** Sends what is left, with the end mark, if the attempt wrote anything. */
  async end(): Promise<void> {
    if (this.seq === 0 && this.pending.length === 0) return;
    await this.flush(true);
  }
}

