import { parseArgs } from "node:util";

export const USAGE = `usage: pnpm demo [--tenant demo] [--workers 2] [--lane 4] [--scale 1]
                 [--organizations N --persons N --deals N --leads N --activities N --notes N --mail-per-deal-max N]
                 [--latency-ms 0] [--transient-error-rate 0.002] [--malformed-rate 0.005] [--seed 42] [--keep]

Runs a whole migration: the CRM sandbox, one coordinator and the workers as separate processes,
StartRun over gRPC, live progress, then a per-kind table. Exits 0 only if every source row is
accounted for. Run it twice for the same tenant: the second run finds everything already here.
The run page (printed at start) follows the run live; --keep leaves every service up after the
run, until Ctrl-C, to look at it and steer it.
Environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/drover_demo), NATS_URL (127.0.0.1:4222).`;

export interface DemoFlags {
  tenant: string;
  workers: number;
  lane: number;
  sizes: Record<string, number>;
  sandbox: Record<string, number>;
  /** Leave the services (and the run page) up after the run, until SIGINT. */
  keep: boolean;
}

const BASE_SIZES = {
  organizations: 1500,
  persons: 4000,
  deals: 3000,
  leads: 1000,
  activities: 4000,
  notes: 3000,
};

export function parseDemoFlags(argv: string[]): DemoFlags {
  const { values } = parseArgs({
    args: argv.filter((a) => a !== "--"),
    options: {
      tenant: { type: "string", default: "demo" },
      workers: { type: "string", default: "2" },
      lane: { type: "string", default: "4" },
      scale: { type: "string", default: "1" },
      organizations: { type: "string" },
      persons: { type: "string" },
      deals: { type: "string" },
      leads: { type: "string" },
      activities: { type: "string" },
      notes: { type: "string" },
      "mail-per-deal-max": { type: "string", default: "3" },
      "latency-ms": { type: "string", default: "0" },
      "transient-error-rate": { type: "string", default: "0.002" },
      "malformed-rate": { type: "string", default: "0.005" },
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
  const scale = num("scale", values.scale, 0.001, 1000);
  const sizes: Record<string, number> = {};
  for (const [kind, base] of Object.entries(BASE_SIZES)) {
    const raw = values[kind as keyof typeof values] as string | undefined;
    sizes[kind] = raw === undefined ? Math.max(1, Math.round(base * scale)) : num(kind, raw, 0, 10_000_000);
  }
  if (!/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/.test(values.tenant))
    throw new Error("--tenant must be letters, digits, '_', '.', ':' or '-'");
  return {
    tenant: values.tenant,
    workers: num("workers", values.workers, 1, 32),
    lane: num("lane", values.lane, 1, 64),
    keep: values.keep === true,
    sizes,
    sandbox: {
      ...sizes,
      "mail-per-deal-max": num("mail-per-deal-max", values["mail-per-deal-max"], 0, 100),
      "latency-ms": num("latency-ms", values["latency-ms"], 0, 60_000),
      "transient-error-rate": num("transient-error-rate", values["transient-error-rate"], 0, 0.5),
      "malformed-rate": num("malformed-rate", values["malformed-rate"], 0, 0.5),
      seed: num("seed", values.seed, 0, 2 ** 32 - 1),
    },
  };
}
