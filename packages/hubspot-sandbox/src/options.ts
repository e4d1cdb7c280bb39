export interface SandboxOptions {
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  seed?: number;
  companies?: number;
  contacts?: number;
  deals?: number;
  /** Records of each engagement type: notes, emails, calls, tasks, meetings. */
  engagements?: number;
  /** Custom properties defined on every object type (names `drover_custom_NN`), beside HubSpot's own. */
  customProperties?: number;
  /** Fraction of records archived: listed only with `archived=true`. */
  archivedRate?: number;
  latencyMs?: number;
  /**
   * Requests admitted in the rolling 10-second window (X-HubSpot-RateLimit-Max): 100 on Free and
   * Starter, 190 on Professional and Enterprise, 250 with the API limit increase.
   */
  tenSecondLimit?: number;
  /** Requests a day for the account (X-HubSpot-RateLimit-Daily); 0 = the headers are not sent (OAuth apps). */
  dailyLimit?: number;
  /** The sandbox's day in seconds (60 in tests); the daily count is whole again at each multiple of it. */
  dailyResetSeconds?: number;
  /** Search requests admitted per second for the account; 0 = unlimited. */
  searchPerSecond?: number;
  /**
   * Longest request URL (path and query) accepted; longer ones get a 414. HubSpot publishes no
   * number: Airbyte's HubSpot source chunks `properties=` at 15,000 characters "as a conservative
   * safe maximum based on observed failures" (source-hubspot BEHAVIOR.md).
   */
  maxUrlLength?: number;
  /** Records of each type edited by a round of changes (a property and hs_lastmodifieddate move). */
  changeEdits?: number;
  /** Records of each type added by a round of changes. */
  changeAdds?: number;
  /**
   * Live records of each type a round of changes archives (HubSpot's delete: the record moves to the
   * archived list, leaves search, and its modification time does not move): every third generated
   * record from the last, skipping edited and already archived ones, while there are any.
   */
  changeArchives?: number;
  /** Applies a round of changes by itself after this many API requests; 0 = only on POST /__sandbox/changes. */
  changesAfterRequests?: number;
  /** Accepted bearer tokens; absent or empty accepts any non-empty token. */
  tokens?: string[];
}

export type ResolvedOptions = Required<Omit<SandboxOptions, "tokens">> & { tokens: string[] | null };

export class OptionsError extends Error {
  constructor(readonly issues: string[]) {
    super(`invalid sandbox options:\n  ${issues.join("\n  ")}`);
    this.name = "OptionsError";
  }
}

/** Every numeric option with its default and its bounds (inclusive). */
export const NUMERIC_OPTIONS = {
  port: [0, 0, 65_535],
  seed: [42, 0, 2 ** 32 - 1],
  companies: [300, 0, 2_000_000],
  contacts: [600, 0, 2_000_000],
  deals: [400, 0, 2_000_000],
  engagements: [300, 0, 2_000_000],
  customProperties: [20, 0, 1_000],
  archivedRate: [0.05, 0, 1],
  latencyMs: [0, 0, 60_000],
  tenSecondLimit: [100, 1, 100_000],
  dailyLimit: [250_000, 0, 100_000_000],
  dailyResetSeconds: [86_400, 1, 86_400 * 7],
  searchPerSecond: [5, 0, 10_000],
  maxUrlLength: [16_384, 256, 1_000_000],
  changeEdits: [0, 0, 100_000],
  changeAdds: [0, 0, 100_000],
  changeArchives: [0, 0, 100_000],
  changesAfterRequests: [0, 0, 100_000_000],
} as const satisfies Record<string, readonly [number, number, number]>;

type NumericKey = keyof typeof NUMERIC_OPTIONS;

export function resolveOptions(options: SandboxOptions = {}): ResolvedOptions {
  const issues: string[] = [];
  const out: Record<string, unknown> = { host: options.host ?? "127.0.0.1" };
  for (const [key, [fallback, min, max]] of Object.entries(NUMERIC_OPTIONS)) {
    const raw = options[key as NumericKey];
    const value = raw ?? fallback;
    if (typeof value !== "number" || Number.isNaN(value) || value < min || value > max)
      issues.push(`${key}: expected a number in [${min}, ${max}], got ${String(raw)}`);
    out[key] = value;
  }
  if (issues.length > 0) throw new OptionsError(issues);
  out.tokens = options.tokens && options.tokens.length > 0 ? [...options.tokens] : null;
  return out as ResolvedOptions;
}
