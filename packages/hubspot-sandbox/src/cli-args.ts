import { NUMERIC_OPTIONS, type SandboxOptions } from "./options.js";

export class CliError extends Error {
  constructor(readonly issues: string[]) {
    super(issues.join("\n"));
    this.name = "CliError";
  }
}

const kebab = (key: string): string => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const envName = (key: string): string => `HUBSPOT_SANDBOX_${kebab(key).replaceAll("-", "_").toUpperCase()}`;

const OPTION_KEYS = [...Object.keys(NUMERIC_OPTIONS), "host", "tokens"];
const KEY_BY_FLAG = new Map(OPTION_KEYS.map((key) => [kebab(key), key]));

export const USAGE = `usage: hubspot-sandbox [--flag value ...]   (every flag also reads HUBSPOT_SANDBOX_<FLAG>)
  --host 127.0.0.1 --port 0 --seed 42
  --companies 300 --contacts 600 --deals 400 --engagements 300 (each of notes, emails, calls, tasks, meetings)
  --custom-properties 20 --archived-rate 0.05 --latency-ms 0
  --ten-second-limit 100 --daily-limit 250000 (0: no daily headers, as for OAuth) --daily-reset-seconds 86400
  --search-per-second 5 --max-url-length 16384
  --change-edits 0 --change-adds 0 --changes-after-requests 0   (or POST /__sandbox/changes)
  --tokens tokenA,tokenB`;

function parseValue(key: string, raw: string, source: string, issues: string[]): unknown {
  if (key === "host") return raw;
  if (key === "tokens") return raw.split(",").filter((t) => t.length > 0);
  const value = raw.trim() === "" ? Number.NaN : Number(raw);
  if (Number.isNaN(value)) issues.push(`${source}: expected a number, got "${raw}"`);
  return value;
}

/** Turns argv (`--name value` or `--name=value`) and HUBSPOT_SANDBOX_* variables into options; flags win. */
export function parseCliArgs(argv: readonly string[], env: NodeJS.ProcessEnv = {}): SandboxOptions {
  const issues: string[] = [];
  const options: Record<string, unknown> = {};
  for (const key of OPTION_KEYS) {
    const raw = env[envName(key)];
    if (raw !== undefined) options[key] = parseValue(key, raw, envName(key), issues);
  }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "--") continue;
    if (!arg.startsWith("--")) {
      issues.push(`unexpected argument "${arg}": flags look like --seed 42`);
      continue;
    }
    const eq = arg.indexOf("=");
    const flag = arg.slice(2, eq === -1 ? undefined : eq);
    const key = KEY_BY_FLAG.get(flag);
    const raw = eq !== -1 ? arg.slice(eq + 1) : argv[++i];
    if (key === undefined) issues.push(`unknown flag --${flag}`);
    else if (raw === undefined) issues.push(`--${flag}: missing value`);
    else options[key] = parseValue(key, raw, `--${flag}`, issues);
  }
  if (issues.length > 0) throw new CliError(issues);
  return options as SandboxOptions;
}
