/** What kind of call a request is, for the stats; its price is its endpoint's (token-costs.ts). */
export type CallType = "list" | "get" | "update" | "search";

export interface SandboxOptions {
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  seed?: number;
  organizations?: number;
  persons?: number;
  deals?: number;
  leads?: number;
  activities?: number;
  notes?: number;
  /** Upper bound of the ordinary per-deal mail count; 0 turns mail off entirely. */
  mailPerDealMax?: number;
  /** Fraction of deals that carry 8..12 messages regardless of mailPerDealMax. */
  heavyMailDealRate?: number;
  latencyMs?: number;
  latencyJitterMs?: number;
  transientErrorRate?: number;
  malformedRate?: number;
  /** Requests per token inside the rolling burst window; 0 = unlimited. */
  burstLimit?: number;
  burstWindowMs?: number;
  /** Token units per company per day, shared by every token; 0 = unlimited. */
  dailyBudget?: number;
  /**
   * The length of the sandbox's "day" (60 for tests): the daily budget is whole again at every
   * multiple of it since the epoch (with the default, at midnight UTC), shifted by
   * dailyResetOffsetSeconds. Nothing in an answer says when: a client learns it, as from Pipedrive.
   */
  dailyResetSeconds?: number;
  /** Seconds past each multiple of dailyResetSeconds at which the day begins (0: at the multiples). */
  dailyResetOffsetSeconds?: number;
  /** Requests tolerated inside a 429's reset period before the 403 page; 0 = never block. */
  abuseThreshold?: number;
  /** Fraction of deals and of leads that are archived: served only by the archived lists. */
  archivedRate?: number;
  /** Fraction of deals deleted in the last 30 days: listed only when status includes `deleted`. */
  deletedDealRate?: number;
  /** 1 when the account's per-deal mail list honours include_body (since 2026); 0 when only the per-message get does. */
  listIncludeBody?: number;
  /**
   * How the account's v2 deal lists answer `include_fields=email_messages_count`: 1 with the count
   * on every deal (Pipedrive's documented answer), 0 ignoring the parameter (no such key), 2 refusing
   * it with a 400: the two last for what an import must survive.
   */
  dealMailCounts?: number;
  /** Rows per kind edited by the mid-run change set (name or title changed, update_time = when it applies). */
  changeEdits?: number;
  /** Rows per kind added by the mid-run change set. */
  changeAdds?: number;
  /** Deals deleted by each round of changes (status deleted, listed with status=deleted). */
  changeDeletes?: number;
  /** Applies the change set by itself after this many API requests; 0 = only on POST /__sandbox/changes. */
  changesAfterRequests?: number;
  /** Accepted API tokens; absent or empty accepts any non-empty token. */
  tokens?: string[];
  /**
   * Multiplies every webhook delay (the 3/30/150 s retries, the 10 s delivery timeout (never below 1 s), the 30 minute
   * ban): 1 is Pipedrive's schedule, 0.001 lets a test see a ban end within seconds.
   */
  webhookTimeScale?: number;
  /**
   * 1: `POST /v1/webhooks` is refused (403), as for a user not allowed webhooks, so a follow run
   * against this account polls (benchmarks compare the two).
   */
  webhooksRefused?: number;
}

export interface ResolvedOptions {
  host: string;
  port: number;
  seed: number;
  organizations: number;
  persons: number;
  deals: number;
  leads: number;
  activities: number;
  notes: number;
  mailPerDealMax: number;
  heavyMailDealRate: number;
  latencyMs: number;
  latencyJitterMs: number;
  transientErrorRate: number;
  malformedRate: number;
  burstLimit: number;
  burstWindowMs: number;
  dailyBudget: number;
  dailyResetSeconds: number;
  dailyResetOffsetSeconds: number;
  abuseThreshold: number;
  archivedRate: number;
  deletedDealRate: number;
  listIncludeBody: number;
  dealMailCounts: number;
  changeEdits: number;
  changeAdds: number;
  changeDeletes: number;
  changesAfterRequests: number;
  webhookTimeScale: number;
  webhooksRefused: number;
  tokens: string[] | null;
}

interface NumberSpec {
  integer: boolean;
  min: number;
  max: number;
  default: number;
}

type NumericKey = Exclude<keyof ResolvedOptions, "host" | "tokens">;

// Sizes are capped so the per-deal mail index (a few typed arrays) stays well below a gigabyte.
const MAX_ROWS = 10_000_000;
/** Added rows take ids right after the generated ones; references to deleted records start past this. */
export const MAX_CHANGES = 100_000;
/** Rounds of changes a sandbox applies at most (POST /__sandbox/changes?again=1 for each after the first). */
export const MAX_CHANGE_ROUNDS = 10;
const int = (min: number, max: number, def: number): NumberSpec => ({
  integer: true,
  min,
  max,
  default: def,
});
const fraction = (def: number): NumberSpec => ({ integer: false, min: 0, max: 1, default: def });

export const NUMERIC_OPTIONS: Record<NumericKey, NumberSpec> = {
  port: int(0, 65535, 0),
  seed: int(0, 2 ** 32 - 1, 42),
  organizations: int(0, MAX_ROWS, 1500),
  persons: int(0, MAX_ROWS, 4000),
  deals: int(0, MAX_ROWS, 3000),
  leads: int(0, MAX_ROWS, 1000),
  activities: int(0, MAX_ROWS, 4000),
  notes: int(0, MAX_ROWS, 3000),
  mailPerDealMax: int(0, 50, 3),
  heavyMailDealRate: fraction(0.1),
  latencyMs: int(0, 600_000, 0),
  latencyJitterMs: int(0, 600_000, 0),
  transientErrorRate: fraction(0),
  malformedRate: fraction(0),
  burstLimit: int(0, 1_000_000, 0),
  burstWindowMs: int(1, 3_600_000, 2000),
  dailyBudget: int(0, Number.MAX_SAFE_INTEGER, 0),
  dailyResetSeconds: int(1, 31 * 86_400, 86_400),
  dailyResetOffsetSeconds: int(0, 31 * 86_400, 0),
  abuseThreshold: int(0, 1_000_000, 3),
  archivedRate: fraction(0.05),
  deletedDealRate: fraction(0.03),
  listIncludeBody: int(0, 1, 1),
  dealMailCounts: int(0, 2, 1),
  changeEdits: int(0, MAX_CHANGES, 0),
  changeAdds: int(0, MAX_CHANGES, 0),
  changeDeletes: int(0, 1000, 0),
  changesAfterRequests: int(0, 1_000_000_000, 0),
  webhookTimeScale: fraction(1),
  webhooksRefused: int(0, 1, 0),
};

export class OptionsError extends Error {
  constructor(readonly issues: string[]) {
    super(`invalid sandbox options:\n  ${issues.join("\n  ")}`);
    this.name = "OptionsError";
  }
}

function checkNumber(key: string, value: unknown, spec: NumberSpec, issues: string[]): number {
  const range = `${spec.min}..${spec.max}`;
  if (typeof value !== "number" || !Number.isFinite(value)) {
    issues.push(
      `${key}: expected ${spec.integer ? "an integer" : "a number"} in ${range}, got ${String(value)}`,
    );
    return spec.default;
  }
  if (spec.integer && !Number.isInteger(value)) {
    issues.push(`${key}: expected an integer in ${range}, got ${value}`);
    return spec.default;
  }
  if (value < spec.min || value > spec.max) {
    issues.push(`${key}: must be in ${range}, got ${value}`);
    return spec.default;
  }
  return value;
}

function resolveTokens(input: unknown, issues: string[]): string[] | null {
  if (input === undefined) return null;
  if (!Array.isArray(input) || !input.every((t) => typeof t === "string" && t.length > 0)) {
    issues.push("tokens: expected a list of non-empty strings");
    return null;
  }
  return input.length === 0 ? null : [...input];
}

/** Validates user options and fills defaults; throws OptionsError listing every problem at once. */
export function resolveOptions(input: SandboxOptions = {}): ResolvedOptions {
  const issues: string[] = [];
  const raw = input as Record<string, unknown>;
  const known = new Set<string>([...Object.keys(NUMERIC_OPTIONS), "host", "tokens"]);
  for (const key of Object.keys(raw)) {
    if (!known.has(key) && raw[key] !== undefined) issues.push(`${key}: unknown option`);
  }
  const numbers = {} as Record<NumericKey, number>;
  for (const [key, spec] of Object.entries(NUMERIC_OPTIONS) as [NumericKey, NumberSpec][]) {
    const value = raw[key];
    numbers[key] = value === undefined ? spec.default : checkNumber(key, value, spec, issues);
  }
  let host = "127.0.0.1";
  if (raw.host !== undefined) {
    if (typeof raw.host === "string" && raw.host.length > 0) host = raw.host;
    else issues.push("host: expected a non-empty string");
  }
  const tokens = resolveTokens(raw.tokens, issues);
  if (issues.length > 0) throw new OptionsError(issues);
  return { ...numbers, host, tokens };
}
