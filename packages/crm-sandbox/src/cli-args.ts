import { NUMERIC_OPTIONS, type SandboxOptions } from "./options.js";

export class CliError extends Error {
  constructor(readonly issues: string[]) {
    super(issues.join("\n"));
    this.name = "CliError";
  }
}

const kebab = (key: string): string => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const envName = (key: string): string => `SANDBOX_${kebab(key).replaceAll("-", "_").toUpperCase()}`;

const OPTION_KEYS = [...Object.keys(NUMERIC_OPTIONS), "host", "tokens"];
const KEY_BY_FLAG = new Map(OPTION_KEYS.map((key) => [kebab(key), key]));

/** Renders an option key the way a CLI user typed it, for error messages. */
export function flagName(key: string): string {
  const [head, ...rest] = key.split(".");
  return `--${kebab(head ?? key)}${rest.length > 0 ? ` ${rest.join(".")}` : ""}`;
}

export const USAGE = `usage: crm-sandbox [--flag value ...]   (every flag also reads SANDBOX_<FLAG> from the environment)
  --host 127.0.0.1 --port 0 --seed 42
  --organizations 1500 --persons 4000 --deals 3000 --leads 1000 --activities 4000 --notes 3000
  --mail-per-deal-max 3 --heavy-mail-deal-rate 0.1
  --latency-ms 0 --latency-jitter-ms 0 --transient-error-rate 0 --malformed-rate 0
  --burst-limit 0 --burst-window-ms 2000 --daily-budget 0 --daily-reset-seconds 86400 --daily-reset-offset-seconds 0
  --abuse-threshold 3
  --archived-rate 0.05 --deleted-deal-rate 0.03 --list-include-body 1 --deal-mail-counts 1
  --change-edits 0 --change-adds 0 --change-deletes 0 --changes-after-requests 0
                                (mid-run changes; or POST /__sandbox/changes, ?again=1 for another round)
  --tokens tokenA,tokenB   (0 = unlimited for limits; each endpoint costs Pipedrive's published tokens)`;

function parseValue(key: string, raw: string, source: string, issues: string[]): unknown {
  if (key === "host") return raw;
  if (key === "tokens") return raw.split(",").filter((t) => t.length > 0);
  const value = raw.trim() === "" ? Number.NaN : Number(raw);
  if (Number.isNaN(value)) {
    issues.push(`${source}: expected a number, got "${raw}"`);
    return undefined;
  }
  return value;
}

/**
 * Turns argv (`--name value` or `--name=value`) and SANDBOX_* variables into options; flags win over
 * the environment. Range checks are left to resolveOptions so both entry points agree.
 */
export function parseCliArgs(argv: readonly string[], env: NodeJS.ProcessEnv = {}): SandboxOptions {
  const issues: string[] = [];
  const options: Record<string, unknown> = {};
  for (const key of OPTION_KEYS) {
    const raw = env[envName(key)];
    if (raw !== undefined) options[key] = parseValue(key, raw, envName(key), issues);
  }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    // `pnpm run start -- --seed 1` forwards the separator itself.
    if (arg === "--") continue;
    if (!arg.startsWith("--")) {
      issues.push(`unexpected argument "${arg}": flags look like --seed 42`);
      continue;
    }
    const eq = arg.indexOf("=");
    const flag = arg.slice(2, eq === -1 ? undefined : eq);
    const key = KEY_BY_FLAG.get(flag);
    if (key === undefined) {
      issues.push(
        `unknown flag --${flag}; known flags: ${[...KEY_BY_FLAG.keys()].map((f) => `--${f}`).join(" ")}`,
      );
      if (eq === -1 && argv[i + 1] !== undefined && !argv[i + 1]?.startsWith("--")) i++;
      continue;
    }
    let raw: string | undefined;
    if (eq !== -1) raw = arg.slice(eq + 1);
    else if (argv[i + 1] !== undefined && !(argv[i + 1] as string).startsWith("--")) raw = argv[++i];
    if (raw === undefined) {
      issues.push(`--${flag}: missing value`);
      continue;
    }
    options[key] = parseValue(key, raw, `--${flag}`, issues);
  }
  if (issues.length > 0) throw new CliError(issues);
  return options as SandboxOptions;
}
