/**
 * A deliberately small in-process metrics registry. The API is kept narrow (inc/set/observe) so that it
 * can later be backed by the OTel metrics SDK without touching call sites.
 */
export type MetricType = "counter" | "gauge" | "histogram";
export type Labels<L extends string> = Readonly<Record<L, string | number>>;

export const DEFAULT_BUCKETS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export interface Series {
  labelValues: readonly string[];
  value: number;
  /** Histograms only: cumulative counts per upper bound, aligned with `buckets`. */
  bucketCounts: number[];
  count: number;
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

export abstract class Metric<L extends string> {
  abstract readonly type: MetricType;
  readonly series = new Map<string, Series>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly L[],
    readonly buckets: readonly number[] = [],
  ) {
    if (!METRIC_NAME.test(name)) throw new Error(`Invalid metric name "${name}"`);
    for (const l of labelNames) {
      if (!LABEL_NAME.test(l) || l.startsWith("__")) throw new Error(`Invalid label name "${l}" on ${name}`);
    }
    // An unlabelled metric is one series; exposing it at zero lets rate() see the first increment.
    if (labelNames.length === 0) this.sample({} as Labels<L>);
  }

  protected sample(labels: Labels<L>): Series {
    const given = Object.keys(labels);
    const labelValues = this.labelNames.map((n) => labels[n]);
    if (given.length !== this.labelNames.length || labelValues.some((v) => v === undefined)) {
      throw new Error(
        `${this.name} expects labels [${this.labelNames.join(", ")}], got [${given.join(", ")}]`,
      );
    }
    const values = labelValues.map(String);
    const key = JSON.stringify(values);
    let series = this.series.get(key);
    if (!series) {
      series = { labelValues: values, value: 0, bucketCounts: this.buckets.map(() => 0), count: 0 };
      this.series.set(key, series);
    }
    return series;
  }
}

export class Counter<L extends string = string> extends Metric<L> {
  readonly type = "counter";
  inc(labels: Labels<L>, n = 1): void {
    if (!(n >= 0)) throw new Error(`${this.name}: counters only go up (got ${n})`);
    this.sample(labels).value += n;
  }
}

export class Gauge<L extends string = string> extends Metric<L> {
  readonly type = "gauge";
  set(labels: Labels<L>, v: number): void {
    this.sample(labels).value = v;
  }
  inc(labels: Labels<L>, n = 1): void {
    this.sample(labels).value += n;
  }
  dec(labels: Labels<L>, n = 1): void {
    this.sample(labels).value -= n;
  }
}

export class Histogram<L extends string = string> extends Metric<L> {
  readonly type = "histogram";
  observe(labels: Labels<L>, v: number): void {
    const series = this.sample(labels);
    this.buckets.forEach((upper, i) => {
      if (v <= upper) series.bucketCounts[i]! += 1;
    });
    series.value += v; // the running sum
    series.count += 1;
  }
}

export type AnyMetric = Counter | Gauge | Histogram;

/** How long a scrape waits for the gauges it refreshes from elsewhere (a database) before answering. */
const REFRESH_TIMEOUT_MS = 5_000;

export class MetricsRegistry {
  private readonly byName = new Map<string, AnyMetric>();
  private readonly refreshers = new Set<() => Promise<void> | void>();

  /**
   * Registers a function run before each scrape, for gauges read from elsewhere (tasks by status
   * from the database). Returns a function that unregisters it, for a service that stops.
   */
  onRefresh(fn: () => Promise<void> | void): () => void {
    this.refreshers.add(fn);
    return () => this.refreshers.delete(fn);
  }

  /**
   * Runs every refresher. A slow or failing one leaves its gauges at their last values: a scrape
   * that times out would lose every other metric too.
   */
  async refresh(): Promise<void> {
    await Promise.all(
      [...this.refreshers].map((fn) =>
        Promise.race([
          Promise.resolve()
            .then(fn)
            .catch(() => {}),
          new Promise<void>((r) => setTimeout(r, REFRESH_TIMEOUT_MS).unref()),
        ]),
      ),
    );
  }

  counter<L extends string = never>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
    return this.register(new Counter(name, help, labelNames));
  }

  gauge<L extends string = never>(name: string, help: string, labelNames: readonly L[] = []): Gauge<L> {
    return this.register(new Gauge(name, help, labelNames));
  }

  histogram<L extends string = never>(
    name: string,
    help: string,
    labelNames: readonly L[] = [],
    buckets: readonly number[] = DEFAULT_BUCKETS,
  ): Histogram<L> {
    const bounds = buckets.filter((b) => b !== Number.POSITIVE_INFINITY); // +Inf is always implied
    if (bounds.some((b, i) => Number.isNaN(b) || (i > 0 && b <= bounds[i - 1]!))) {
      throw new Error(`${name}: buckets must be strictly increasing numbers`);
    }
    return this.register(new Histogram(name, help, labelNames, bounds));
  }

  /** Registered metrics in registration order. */
  collect(): readonly AnyMetric[] {
    return [...this.byName.values()];
  }

  // Re-registering the same definition returns the existing metric, so modules that declare their metrics
  // at load time survive being imported twice; a conflicting definition is a bug and throws.
  private register<M extends AnyMetric>(metric: M): M {
    const existing = this.byName.get(metric.name);
    if (!existing) {
      this.byName.set(metric.name, metric);
      return metric;
    }
    const signature = (m: AnyMetric) => `${m.type}|${m.labelNames.join()}|${m.buckets.join()}`;
    if (signature(existing) !== signature(metric)) {
      throw new Error(`Metric ${metric.name} is already registered with a different definition`);
    }
    return existing as M;
  }
}

/** The process-wide registry that services export on /metrics. */
export const metrics = new MetricsRegistry();
