import { parseArgs } from "node:util";

export const USAGE = `usage: pnpm demo [--source crm|hubspot] [--tenant demo] [--workers 2] [--lane 4] [--scale 1]
                 [--latency-ms 0] [--seed 42] [--keep]
  --source crm (Pipedrive, the default):
                 [--organizations N --persons N --deals N --leads N --activities N --notes N --mail-per-deal-max N]
                 [--transient-error-rate 0.002] [--malformed-rate 0.005]
  --source hubspot:
                 [--companies N --contacts N --deals N --engagements N (of each engagement type)]
                 [--custom-properties 20] [--archived-rate 0.05] [--ten-second-limit 100]

Runs a whole migration: the source's sandbox, one coordinator and the workers as separate processes,
StartRun over gRPC, live progress, then a per-kind table. Exits 0 only if every source row is
accounted for. Run it twice for the same tenant: the second run finds everything already here.
The run page (printed at start) follows the run live; --keep leaves every service up after the
run, until Ctrl-C, to look at it and steer it.
Environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/drover_demo), NATS_URL (127.0.0.1:4222).`;

export type DemoSource = "crm" | "hubspot";

export interface DemoFlags {
  source: DemoSource;
  tenant: string;
  workers: number;
  lane: number;
  sizes: Record<string, number>;
  sandbox: Record<string, number>;
  /** Leave the services (and the run page) up after the run, until SIGINT. */
  keep: boolean;
}

/** Each source's sandbox at --scale 1: its kinds' sizes, by the sandbox's flag names. */
const BASE_SIZES: Readonly<Record<DemoSource, Readonly<Record<string, number>>>> = {
  crm: { organizations: 1500, persons: 4000, deals: 3000, leads: 1000, activities: 4000, notes: 3000 },
  // HubSpot's engagements are per type: 600 each of notes, emails, calls, tasks and meetings.
  hubspot: { companies: 1500, contacts: 4000, deals: 3000, engagements: 600 },
};

/** Each sandbox's other flags the demo passes on: [default, min, max]. */
const OPTIONS: Readonly<Record<DemoSource, Readonly<Record<string, readonly [number, number, number]>>>> = {
  crm: {
    "mail-per-deal-max": [3, 0, 100],
    "transient-error-rate": [0.002, 0, 0.5],
    "malformed-rate": [0.005, 0, 0.5],
  },
  hubspot: {
    "custom-properties": [20, 0, 1_000],
    "archived-rate": [0.05, 0, 1],
    // Free and Starter accounts' 100 requests a rolling 10 seconds: the tightest tier.
    "ten-second-limit": [100, 1, 100_000],
  },
};

/** Size flags of the other source, refused rather than silently ignored. */
const SIZE_FLAGS = [...new Set(Object.values(BASE_SIZES).flatMap((sizes) => Object.keys(sizes)))];

export function parseDemoFlags(argv: string[]): DemoFlags {
  const { values } = parseArgs({
    args: argv.filter((a) => a !== "--"),
    options: {
      source: { type: "string", default: "crm" },
      tenant: { type: "string", default: "demo" },
      workers: { type: "string", default: "2" },
      lane: { type: "string", default: "4" },
      scale: { type: "string", default: "1" },
      ...Object.fromEntries(SIZE_FLAGS.map((flag) => [flag, { type: "string" as const }])),
      "mail-per-deal-max": { type: "string" },
      "latency-ms": { type: "string", default: "0" },
      "transient-error-rate": { type: "string" },
      "malformed-rate": { type: "string" },
      "custom-properties": { type: "string" },
      "archived-rate": { type: "string" },
      "ten-second-limit": { type: "string" },
      seed: { type: "string", default: "42" },
      keep: { type: "boolean", default: false },
      help: { type: "boolean", default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const num = (name: string, raw: string | undefined, min: number, max: number): number => {
    const n = Number(raw);
    if (!Number.isFinite(n) || n < min || n > max)
      throw new Error(`--${name} must be a number from ${min} to ${max}, got "${raw}"`);
    return n;
  };
  const source = values.source as string;
  if (source !== "crm" && source !== "hubspot")
    throw new Error(`--source must be crm (Pipedrive) or hubspot, got "${source}"`);
  const scale = num("scale", values.scale, 0.001, 1000);
  const base = BASE_SIZES[source];
  const sizes: Record<string, number> = {};
  for (const [kind, size] of Object.entries(base)) {
    const raw = values[kind as keyof typeof values] as string | undefined;
    sizes[kind] = raw === undefined ? Math.max(1, Math.round(size * scale)) : num(kind, raw, 0, 10_000_000);
  }
  const own = new Set([...Object.keys(base), ...Object.keys(OPTIONS[source])]);
  const foreign = [...SIZE_FLAGS, ...Object.values(OPTIONS).flatMap((o) => Object.keys(o))].filter(
    (flag) => !own.has(flag) && values[flag as keyof typeof values] !== undefined,
  );
  if (foreign.length > 0)
    throw new Error(`--${foreign[0]} is not a flag of --source ${source}'s sandbox (see the usage below)`);
  const options: Record<string, number> = {};
  for (const [flag, [fallback, min, max]] of Object.entries(OPTIONS[source])) {
    const raw = values[flag as keyof typeof values] as string | undefined;
    options[flag] = num(flag, raw ?? String(fallback), min, max);
  }
  if (!/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/.test(values.tenant))
    throw new Error("--tenant must be letters, digits, '_', '.', ':' or '-'");
  return {
    source,
    tenant: values.tenant,
    workers: num("workers", values.workers, 1, 32),
    lane: num("lane", values.lane, 1, 64),
    keep: values.keep === true,
    sizes,
    sandbox: {
      ...sizes,
      ...options,
      "latency-ms": num("latency-ms", values["latency-ms"], 0, 60_000),
      seed: num("seed", values.seed, 0, 2 ** 32 - 1),
    },
  };
}
