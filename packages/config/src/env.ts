/**
 * The building blocks of every service's settings: a zod schema per variable (intVar, postgresUrl,
 * address, identifier, the metrics port and host), the parse that fails at start with every problem
 * named (ConfigError), and the metrics options. Each service compiles its own schema from these
 * once (its config.ts).
 */
import { z } from "zod";

export { z };

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
  }
}

/**
 * Compiles a service's configuration from the environment once, at start. Every problem is reported
 * at once, each naming the variable and what to fix, so a bad deploy fails before touching anything.
 * `checks` adds what a schema cannot say (keys that must parse, files that must exist), reported
 * together with the schema's own problems.
 */
export function parseEnv<S extends z.ZodObject>(
  schema: S,
  env: NodeJS.ProcessEnv = process.env,
  checks: (env: NodeJS.ProcessEnv) => string[] = () => [],
): z.infer<S> {
  const raw: Record<string, string | undefined> = {};
  for (const key of Object.keys(schema.shape)) {
    const value = env[key];
    raw[key] = value === "" ? undefined : value;
  }
  const result = schema.safeParse(raw);
  const problems = result.success
    ? []
    : result.error.issues.map((issue) => {
        const key = String(issue.path[0] ?? "?");
        const got = raw[key];
        return `${key}: ${issue.message}${got === undefined ? "" : ` (got "${got.slice(0, 80)}")`}`;
      });
  problems.push(...checks(env));
  if (!result.success || problems.length > 0) throw new ConfigError(problems);
  return result.data;
}

/** An integer environment variable within bounds. */
export function intVar(min: number, max: number, fallback: number) {
  return z.coerce
    .number({ message: "must be a number" })
    .int({ message: "must be a whole number" })
    .min(min, { message: `must be at least ${min}` })
    .max(max, { message: `must be at most ${max}` })
    .default(fallback);
}

/** A postgres:// URL. */
export function postgresUrl(fallback: string) {
  return z
    .string()
    .default(fallback)
    .refine((v) => /^postgres(ql)?:\/\//.test(v), {
      message: "must be a postgres:// URL, e.g. postgres://postgres@127.0.0.1:5432/drover",
    })
    .meta({ format: "`postgres://` URL" });
}

/** host:port. */
export function address(fallback: string) {
  return z
    .string()
    .default(fallback)
    .refine((v) => /^[^\s:]+:\d{1,5}$/.test(v), { message: "must be host:port, e.g. 127.0.0.1:50051" })
    .meta({ format: "`host:port`" });
}

export function identifier(fallback: string) {
  return z
    .string()
    .default(fallback)
    .refine((v) => /^[a-zA-Z0-9_-]{1,64}$/.test(v), {
      message: "may only hold letters, digits, '_' and '-'",
    })
    .meta({ format: "name: letters, digits, `_`, `-` (1 to 64)" });
}

/**
 * The port a service serves Prometheus metrics on: a number (0 picks a free one, which the ready line
 * reports), or `off`. Returns null for off.
 */
export function metricsPort(fallback: number) {
  return z
    .string()
    .default(String(fallback))
    .refine((v) => v === "off" || (/^\d{1,5}$/.test(v) && Number(v) <= 65535), {
      message: 'must be a port number (0 picks a free one) or "off"',
    })
    .transform((v) => (v === "off" ? null : Number(v)))
    .meta({
      format: "port, or `off`",
      description:
        "Port of the Prometheus endpoint `http://DROVER_METRICS_HOST:DROVER_METRICS_PORT/metrics`; `0` picks a free one (named in the ready line), `off` serves none.",
    });
}

/** Where a service serves /metrics; a null port for none. */
export interface MetricsOptions {
  host: string;
  port: number | null;
}

export function metricsOptions(config: {
  DROVER_METRICS_HOST: string;
  DROVER_METRICS_PORT: number | null;
}): MetricsOptions {
  return { host: config.DROVER_METRICS_HOST, port: config.DROVER_METRICS_PORT };
}

/** The interface metrics listen on: loopback unless a scraper elsewhere needs it (0.0.0.0). */
export function metricsHost() {
  return z
    .string()
    .default("127.0.0.1")
    .refine((v) => /^[0-9a-zA-Z.:_-]{1,253}$/.test(v), { message: "must be a host name or IP address" })
    .meta({
      format: "host name or IP address",
      description: "Interface the metrics port listens on; `0.0.0.0` for a scraper on another host.",
    });
}
