// Throughput: rows/s over the whole run, from the rows it committed per time bucket, drawn as an
// inline SVG line.

import { api, runPath } from "./api.js";
import { h, svg } from "./dom.js";
import { duration, fmt } from "./format.js";
import { onError, VOCABULARY } from "./page.js";

const W = 600;
const H = 160;
const PAD = { l: 44, r: 8, t: 8, b: 20 };

export class ThroughputPanel {
  constructor(runId) {
    this.runId = runId;
    this.throughput = null; // { bucketSeconds, points: [{ at, rows }] }
    this.throughputAt = 0;
    this.run = null; // the run as last drawn
    this.chart = h("div", { id: "throughput" });
    this.root = h("section", { class: "panel" }, h("h2", {}, "Throughput (rows/s)"), this.chart);
  }

  /** Reads the run's rows over time again, at most every `minMs`. */
  async refresh(minMs = 0) {
    if (Date.now() - this.throughputAt < minMs) return;
    this.throughputAt = Date.now();
    try {
      this.throughput = await api("GET", runPath(this.runId, "throughput"));
      if (this.run) this.draw(this.run);
    } catch (err) {
      onError(err);
    }
  }

  draw(run) {
    this.run = run;
    const points = ratePoints(this.throughput, run, this.throughputAt);
    const root = svg("svg", {
      class: "chart",
      viewBox: `0 0 ${W} ${H}`,
      preserveAspectRatio: "none",
      role: "img",
      "aria-label": "Rows per second over time",
    });
    root.append(svg("line", { class: "axis", x1: PAD.l, y1: H - PAD.b, x2: W - PAD.r, y2: H - PAD.b }));
    if (points.length < 2) {
      const active = VOCABULARY.liveRunStatuses.includes(run.status);
      root.append(
        svg(
          "text",
          { x: PAD.l, y: H / 2 },
          active
            ? "Measuring: the chart fills in as the run commits rows."
            : `${fmt(run.rows)} rows; the run is ${run.status}.`,
        ),
      );
    } else {
      root.append(...rateLine(points, this.throughput.bucketSeconds, run));
    }
    this.chart.replaceChildren(root);
  }
}

/**
 * Each bucket's rate at its end. A live run's last bucket is still filling: its rate counts the
 * time it has had as of `readAt`, when the counts were read (the bucket's rows are those of then).
 */
function ratePoints(t, run, readAt) {
  const points = [];
  if (!t) return points;
  t.points.forEach((p, i) => {
    const at = Date.parse(p.at);
    const last = i === t.points.length - 1;
    const seconds =
      last && !run.finishedAt ? Math.min(t.bucketSeconds, (readAt - at) / 1000) : t.bucketSeconds;
    if (seconds > 0) points.push({ t: at + seconds * 1000, rate: p.rows / seconds });
  });
  return points;
}

/** The line and the area under it, scaled to the chart, with the axes' labels. */
function rateLine(points, bucketSeconds, run) {
  const t0 = points[0].t;
  const t1 = points[points.length - 1].t;
  const max = Math.max(1, ...points.map((p) => p.rate));
  const x = (t) => PAD.l + ((W - PAD.l - PAD.r) * (t - t0)) / Math.max(1, t1 - t0);
  const y = (r) => H - PAD.b - ((H - PAD.t - PAD.b) * r) / max;
  const line = points.map((p) => `${x(p.t).toFixed(1)},${y(p.rate).toFixed(1)}`).join(" ");
  return [
    svg("polygon", { class: "area", points: `${x(t0)},${H - PAD.b} ${line} ${x(t1)},${H - PAD.b}` }),
    svg("polyline", { class: "line", points: line }),
    svg("text", { x: 2, y: PAD.t + 10 }, `${Math.round(max)}`),
    svg("text", { x: 2, y: H - PAD.b }, "0"),
    svg(
      "text",
      { x: PAD.l, y: H - 4 },
      `${duration((t1 - t0) / 1000)} of the run, ${bucketSeconds}s buckets`,
    ),
    svg(
      "text",
      { x: W - PAD.r - 150, y: H - 4 },
      `${run.finishedAt ? "last" : "now"} ${Math.round(points[points.length - 1].rate)} rows/s`,
    ),
  ];
}
