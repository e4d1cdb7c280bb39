import { type AnyMetric, type MetricsRegistry, metrics } from "./metrics.js";

/** Content type of the Prometheus text exposition format 0.0.4. */
export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

const escapeHelp = (s: string) => s.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
const escapeLabel = (s: string) => s.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");

function formatValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Number.POSITIVE_INFINITY) return "+Inf";
  if (v === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(v);
}

function formatLabels(names: readonly string[], values: readonly string[]): string {
  if (names.length === 0) return "";
  return `{${names.map((n, i) => `${n}="${escapeLabel(values[i] ?? "")}"`).join(",")}}`;
}

function renderMetric(metric: AnyMetric, out: string[]): void {
  out.push(`# HELP ${metric.name} ${escapeHelp(metric.help)}`, `# TYPE ${metric.name} ${metric.type}`);
  for (const s of metric.series.values()) {
    const labels = formatLabels(metric.labelNames, s.labelValues);
    if (metric.type !== "histogram") {
      out.push(`${metric.name}${labels} ${formatValue(s.value)}`);
      continue;
    }
    const names = [...metric.labelNames, "le"];
    metric.buckets.forEach((upper, i) => {
      const le = formatLabels(names, [...s.labelValues, formatValue(upper)]);
      out.push(`${metric.name}_bucket${le} ${s.bucketCounts[i]}`);
    });
    out.push(`${metric.name}_bucket${formatLabels(names, [...s.labelValues, "+Inf"])} ${s.count}`);
    out.push(
      `${metric.name}_sum${labels} ${formatValue(s.value)}`,
      `${metric.name}_count${labels} ${s.count}`,
    );
  }
}

/** Renders every metric of `registry` in the Prometheus text format, newline-terminated. */
export function renderPrometheus(registry: MetricsRegistry = metrics): string {
  const out: string[] = [];
  for (const metric of registry.collect()) renderMetric(metric, out);
  return out.length === 0 ? "" : `${out.join("\n")}\n`;
}
