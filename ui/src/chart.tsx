// History charts drawn by the dashboard itself, in SVG (no charting
// library: docs/dashboard.md says why): executions per interval by
// outcome as stacked bars, fire and start lag p50/p99 as lines, and the
// intervals with dead or failed executions marked with links to them.
// Readable without colour: each outcome has a fill pattern, each line a
// dash and a marker shape, all named in the legend; a text summary and a
// data table (behind a disclosure) carry the same numbers.
import { useState } from "preact/hooks";
import { api, must, type Schemas } from "./api";
import { ErrorBox, useLoad } from "./components";
import { href } from "./router";

export type Series = Schemas["StatsSeries"];
export type Point = Schemas["StatsPoint"];
export type Interval = Series["interval"];

/** The outcomes stacked, bottom up, with their fill and pattern. */
const stack = [
  { key: "succeeded", label: "succeeded", fill: "url(#p-ok)", swatch: "#1e7b34" },
  { key: "failed", label: "failed (retrying)", fill: "url(#p-failed)", swatch: "#b26b00" },
  { key: "dead", label: "dead", fill: "url(#p-dead)", swatch: "#b3261e" },
  { key: "cancelled", label: "cancelled", fill: "url(#p-cancelled)", swatch: "#5b6472" },
  { key: "flight", label: "queued, running or waiting", fill: "url(#p-flight)", swatch: "#1f5fbf" },
] as const;

/** The lag lines, with their dash and marker. */
const lines = [
  { key: "fire50", label: "fire lag p50", dash: "", marker: "circle" },
  { key: "fire99", label: "fire lag p99", dash: "6 3", marker: "square" },
  { key: "start50", label: "start lag p50", dash: "2 2", marker: "triangle" },
  { key: "start99", label: "start lag p99", dash: "8 3 2 3", marker: "diamond" },
] as const;

type LineKey = (typeof lines)[number]["key"];

/** count is a point's executions of a stacked outcome. */
export function count(p: Point, key: string): number {
  if (key === "flight") return (p.counts.queued ?? 0) + (p.counts.running ?? 0) + (p.counts.waiting ?? 0);
  return p.counts[key] ?? 0;
}

function lag(p: Point, key: LineKey): number | undefined {
  switch (key) {
    case "fire50": return p.fire_lag_ms?.p50;
    case "fire99": return p.fire_lag_ms?.p99;
    case "start50": return p.start_lag_ms?.p50;
    case "start99": return p.start_lag_ms?.p99;
  }
}

const ms = { "1m": 60e3, "5m": 300e3, "15m": 900e3, "1h": 3600e3, "6h": 21600e3, "1d": 86400e3 } as const;

/** intervalMs is an interval's width in milliseconds. */
export function intervalMs(iv: Interval): number {
  return ms[iv];
}

function label(t: Date, iv: Interval): string {
  const iso = t.toISOString();
  return iv === "1d" ? iso.slice(0, 10) : iso.slice(0, 16).replace("T", " ") + "Z";
}

/** executionsLink is the executions page filtered to a point's interval and state. */
export function executionsLink(p: Point, iv: Interval, state: string, filter: SeriesFilter): string {
  const at = new Date(p.at);
  const q = new URLSearchParams({ state, since: at.toISOString(), until: new Date(at.getTime() + ms[iv]).toISOString() });
  if (filter.namespace) q.set("namespace", filter.namespace);
  if (filter.job_id) q.set("job_id", filter.job_id);
  if (filter.handler) q.set("handler", filter.handler);
  return href("/executions?" + q.toString());
}

/** summary is the chart in words. */
export function summary(s: Series, what: string): string {
  const tot: Record<string, number> = {};
  let worst: number | undefined;
  for (const p of s.points) {
    for (const o of stack) tot[o.key] = (tot[o.key] ?? 0) + count(p, o.key);
    const v = p.start_lag_ms?.p99;
    if (v !== undefined) worst = Math.max(worst ?? 0, v);
  }
  const all = s.points.reduce((n, p) => n + p.total, 0);
  return `${what}, per ${s.interval}, from ${label(new Date(s.since), s.interval)} to ${label(new Date(s.until), s.interval)}: ` +
    `${all} executions: ${stack.map((o) => `${tot[o.key]} ${o.label}`).join(", ")}. ` +
    (worst === undefined ? "No execution started." : `Start lag p99 at most ${worst} ms in one interval.`);
}

export type SeriesFilter = { namespace?: string; job_id?: string; handler?: string };

const W = 760, H = 300, left = 48, right = 12, barTop = 10, barH = 150, lagTop = 200, lagH = 70;

function Marker({ shape, x, y }: { shape: string; x: number; y: number }) {
  switch (shape) {
    case "circle": return <circle cx={x} cy={y} r={3} />;
    case "square": return <rect x={x - 3} y={y - 3} width={6} height={6} />;
    case "triangle": return <path d={`M${x},${y - 4}L${x + 4},${y + 3}L${x - 4},${y + 3}Z`} />;
    default: return <path d={`M${x},${y - 4}L${x + 4},${y}L${x},${y + 4}L${x - 4},${y}Z`} />;
  }
}

/** HistoryChart draws a series (GET /v1/stats/series) with its legend, summary and data table. */
export function HistoryChart({ series, title, filter = {} }: { series: Series; title: string; filter?: SeriesFilter }) {
  const pts = series.points;
  const n = Math.max(pts.length, 1);
  const bw = (W - left - right) / n;
  const maxN = Math.max(1, ...pts.map((p) => p.total));
  const lagVals = pts.flatMap((p) => lines.map((l) => lag(p, l.key)).filter((v): v is number => v !== undefined));
  const maxLag = Math.max(1, ...lagVals);
  const x = (i: number) => left + i * bw;
  const yN = (v: number) => barTop + barH - (v / maxN) * barH;
  const yLag = (v: number) => lagTop + lagH - (v / maxLag) * lagH;
  const text = summary(series, title);
  const id = "c" + Math.abs([...title].reduce((h, c) => (h * 31 + c.charCodeAt(0)) | 0, 7));
  const ticks = pts.length <= 1 ? [0] : [0, Math.floor(pts.length / 2), pts.length - 1];
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${W} ${H}`} width="100%" preserveAspectRatio="xMidYMid meet">
        <defs>
          <pattern id="p-ok" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#1e7b34" /></pattern>
          <pattern id="p-failed" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#f2c46d" /><path d="M0,6L6,0" stroke="#6b4500" stroke-width="1.2" /></pattern>
          <pattern id="p-dead" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#e8837c" /><path d="M0,0L6,6M0,6L6,0" stroke="#7f1d1d" stroke-width="1.2" /></pattern>
          <pattern id="p-cancelled" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#d9dee5" /><circle cx="3" cy="3" r="1.2" fill="#1d2430" /></pattern>
          <pattern id="p-flight" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#a9c3ec" /><path d="M0,3H6" stroke="#1f5fbf" stroke-width="1" /></pattern>
        </defs>
        <g role="img" aria-label={text}>
          <text x={4} y={barTop + 8} class="axis">{maxN}</text>
          <text x={4} y={barTop + barH} class="axis">0</text>
          <line x1={left} x2={W - right} y1={barTop + barH} y2={barTop + barH} stroke="#5b6472" />
          {pts.map((p, i) => {
            let acc = 0;
            return (
              <g key={p.at}>
                {stack.map((o) => {
                  const v = count(p, o.key);
                  if (v === 0) return null;
                  const y0 = yN(acc + v), h = yN(acc) - yN(acc + v);
                  acc += v;
                  return <rect key={o.key} x={x(i) + bw * 0.1} y={y0} width={Math.max(bw * 0.8, 0.5)} height={h} fill={o.fill} />;
                })}
              </g>
            );
          })}
          <text x={4} y={lagTop + 8} class="axis">{Math.round(maxLag)} ms</text>
          <text x={4} y={lagTop + lagH} class="axis">0 ms</text>
          <line x1={left} x2={W - right} y1={lagTop + lagH} y2={lagTop + lagH} stroke="#5b6472" />
          {lines.map((l) => {
            const segs = pts.map((p, i) => [i, lag(p, l.key)] as const).filter(([, v]) => v !== undefined) as [number, number][];
            if (segs.length === 0) return null;
            return (
              <g key={l.key} class={"line " + l.key}>
                <polyline fill="none" stroke="#1d2430" stroke-width="1.5" stroke-dasharray={l.dash}
                  points={segs.map(([i, v]) => `${x(i) + bw / 2},${yLag(v)}`).join(" ")} />
                {segs.length <= 100 && segs.map(([i, v]) => <Marker key={i} shape={l.marker} x={x(i) + bw / 2} y={yLag(v)} />)}
              </g>
            );
          })}
          {ticks.map((i) => pts[i] && (
            <text key={i} x={Math.min(x(i), W - 120)} y={H - 4} class="axis">{label(new Date(pts[i].at), series.interval)}</text>
          ))}
        </g>
        <g class="marks">
          {pts.map((p, i) => ["dead", "failed"].map((st) => {
            const v = p.counts[st] ?? 0;
            if (v === 0) return null;
            const cx = x(i) + bw / 2, cy = barTop + barH + (st === "dead" ? 12 : 24);
            return (
              <a key={p.at + st} href={executionsLink(p, series.interval, st, filter)} class={"mark " + st}
                aria-label={`${v} ${st} from ${label(new Date(p.at), series.interval)}: show them`}>
                {st === "dead"
                  ? <path d={`M${cx - 5},${cy - 5}L${cx + 5},${cy + 5}M${cx - 5},${cy + 5}L${cx + 5},${cy - 5}`} stroke="#7f1d1d" stroke-width="2.5" />
                  : <circle cx={cx} cy={cy} r={4} fill="none" stroke="#6b4500" stroke-width="2" />}
                <rect x={cx - 7} y={cy - 7} width={14} height={14} fill="transparent" />
              </a>
            );
          }))}
        </g>
      </svg>
      <figcaption>
        <p class="chart-summary">{text}</p>
        <ul class="legend">
          {stack.map((o) => (
            <li key={o.key}><svg width="14" height="14" aria-hidden="true"><rect width="14" height="14" fill={o.fill} stroke="#1d2430" /></svg> {o.label}</li>
          ))}
          {lines.map((l) => (
            <li key={l.key}><svg width="30" height="14" aria-hidden="true"><line x1="0" x2="30" y1="7" y2="7" stroke="#1d2430" stroke-dasharray={l.dash} stroke-width="1.5" /><Marker shape={l.marker} x={15} y={7} /></svg> {l.label}</li>
          ))}
          <li><svg width="14" height="14" aria-hidden="true"><path d="M2,2L12,12M2,12L12,2" stroke="#7f1d1d" stroke-width="2.5" /></svg> dead (a link to them)</li>
          <li><svg width="14" height="14" aria-hidden="true"><circle cx="7" cy="7" r="4" fill="none" stroke="#6b4500" stroke-width="2" /></svg> failed (a link to them)</li>
        </ul>
        <details>
          <summary>Data table</summary>
          <table class="chart-data" id={id}>
            <caption class="sr-only">{title}, per {series.interval}</caption>
            <thead>
              <tr>
                <th scope="col">From</th><th scope="col">Total</th>
                {stack.map((o) => <th scope="col" key={o.key}>{o.label}</th>)}
                {lines.map((l) => <th scope="col" key={l.key}>{l.label} (ms)</th>)}
              </tr>
            </thead>
            <tbody>
              {pts.filter((p) => p.total > 0).map((p) => (
                <tr key={p.at} data-at={p.at}>
                  <th scope="row">{label(new Date(p.at), series.interval)}</th>
                  <td>{p.total}</td>
                  {stack.map((o) => <td key={o.key} data-key={o.key}>{count(p, o.key)}</td>)}
                  {lines.map((l) => <td key={l.key} data-key={l.key}>{lag(p, l.key) ?? "—"}</td>)}
                </tr>
              ))}
            </tbody>
          </table>
        </details>
      </figcaption>
    </figure>
  );
}

const ranges = [
  { key: "hour", label: "Last hour", since: "1h", interval: "1m" },
  { key: "day", label: "Last day", since: "24h", interval: "15m" },
  { key: "week", label: "Last week", since: "168h", interval: "1h" },
] as const;

/** HistorySection loads a series for a filter and draws it, with a last hour / day / week switch. */
export function HistorySection({ title, filter = {}, initial = "day" }: { title: string; filter?: SeriesFilter; initial?: "hour" | "day" | "week" }) {
  const [range, setRange] = useState<string>(initial);
  const r = ranges.find((x) => x.key === range) ?? ranges[1];
  const s = useLoad(
    () => must(api.GET("/v1/stats/series", { params: { query: { ...filter, since: r.since, interval: r.interval } } })),
    [r.key, filter.namespace, filter.job_id, filter.handler],
  );
  return (
    <section aria-labelledby="history" class="history">
      <h2 id="history">{title}</h2>
      <div role="group" aria-label="Range" class="range-switch">
        {ranges.map((x) => (
          <button key={x.key} type="button" aria-pressed={x.key === range} onClick={() => setRange(x.key)}>{x.label}</button>
        ))}
      </div>
      <ErrorBox error={s.error} />
      {s.data ? <HistoryChart series={s.data} title={title + ", " + r.label.toLowerCase()} filter={filter} /> : <p class="muted">Loading…</p>}
    </section>
  );
}
