import { describe, expect, it } from "vitest";
import { MetricsRegistry, metrics, PROMETHEUS_CONTENT_TYPE, renderPrometheus } from "../src/index.js";

describe("renderPrometheus", () => {
  it("renders counters, gauges and histograms with labels", () => {
    const registry = new MetricsRegistry();
    const tasks = registry.counter("drover_tasks_total", "Tasks finished.", ["kind", "outcome"]);
    const inflight = registry.gauge("drover_tasks_inflight", "Tasks running now.", ["worker"]);
    const duration = registry.histogram("drover_task_seconds", "Task duration.", ["kind"], [0.5, 1, 5]);

    tasks.inc({ kind: "rewrite", outcome: "ok" });
    tasks.inc({ kind: "rewrite", outcome: "ok" }, 2);
    tasks.inc({ kind: "codemod", outcome: "failed" });
    inflight.set({ worker: "w-1" }, 4);
    inflight.dec({ worker: "w-1" });
    duration.observe({ kind: "rewrite" }, 0.25);
    duration.observe({ kind: "rewrite" }, 0.75);
    duration.observe({ kind: "rewrite" }, 8);

    expect(renderPrometheus(registry)).toBe(
      [
        "# HELP drover_tasks_total Tasks finished.",
        "# TYPE drover_tasks_total counter",
        'drover_tasks_total{kind="rewrite",outcome="ok"} 3',
        'drover_tasks_total{kind="codemod",outcome="failed"} 1',
        "# HELP drover_tasks_inflight Tasks running now.",
        "# TYPE drover_tasks_inflight gauge",
        'drover_tasks_inflight{worker="w-1"} 3',
        "# HELP drover_task_seconds Task duration.",
        "# TYPE drover_task_seconds histogram",
        'drover_task_seconds_bucket{kind="rewrite",le="0.5"} 1',
        'drover_task_seconds_bucket{kind="rewrite",le="1"} 2',
        'drover_task_seconds_bucket{kind="rewrite",le="5"} 2',
        'drover_task_seconds_bucket{kind="rewrite",le="+Inf"} 3',
        'drover_task_seconds_sum{kind="rewrite"} 9',
        'drover_task_seconds_count{kind="rewrite"} 3',
        "",
      ].join("\n"),
    );
    expect(PROMETHEUS_CONTENT_TYPE).toMatch(/^text\/plain; version=0\.0\.4/);
  });

  it("escapes help text and label values, and shows unlabelled metrics at zero", () => {
    const registry = new MetricsRegistry();
    registry.counter("drover_boots_total", "Boots.\nBack\\slash");
    registry.gauge("drover_info", "Info.", ["path"]).set({ path: 'C:\\repo "main"\nx' }, 1);

    expect(renderPrometheus(registry)).toBe(
      [
        "# HELP drover_boots_total Boots.\\nBack\\\\slash",
        "# TYPE drover_boots_total counter",
        "drover_boots_total 0",
        "# HELP drover_info Info.",
        "# TYPE drover_info gauge",
        'drover_info{path="C:\\\\repo \\"main\\"\\nx"} 1',
        "",
      ].join("\n"),
    );
  });

  it("returns the existing metric for an identical definition and rejects a conflicting one", () => {
    const registry = new MetricsRegistry();
    const a = registry.counter("drover_x_total", "X.", ["kind"]);
    expect(registry.counter("drover_x_total", "X.", ["kind"])).toBe(a);
    expect(() => registry.gauge("drover_x_total", "X.", ["kind"])).toThrow(/different definition/);
  });

  it("validates labels, counter direction and names", () => {
    const registry = new MetricsRegistry();
    const c = registry.counter("drover_y_total", "Y.", ["kind"]);
    expect(() => c.inc({ kind: "a", extra: "b" } as never)).toThrow(/expects labels/);
    expect(() => c.inc({} as never)).toThrow(/expects labels/);
    expect(() => c.inc({ kind: "a" }, -1)).toThrow(/only go up/);
    expect(() => registry.counter("bad-name", "Z.")).toThrow(/Invalid metric name/);
    expect(() => registry.histogram("drover_h", "H.", [], [1, 1])).toThrow(/strictly increasing/);
  });

  it("renders the default registry", () => {
    metrics.counter("drover_default_total", "Default.").inc({});
    expect(renderPrometheus()).toContain("drover_default_total 1\n");
  });
});
