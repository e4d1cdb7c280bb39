import {
  type BudgetPacer,
  type CallType,
  HeaderBudgetPacer,
  PermanentError,
  SourceClient,
} from "@drover/provider-sdk";
import { type HubSpotLimitOptions, hubspotAdapter } from "./rate-limits.js";
import { type SearchMark, type SearchPace, searchPaceOf } from "./search-pace.js";

/** HubSpot's documented rate for the search endpoints: five requests a second per account. */
export const SEARCHES_PER_SECOND = 5;

/**
 * The longest request URL sent. HubSpot publishes none; long `properties=` lists draw a 414
 * ("Request-URI Too Large"), and Airbyte's HubSpot source cuts them at 15,000 characters "as a
 * conservative safe maximum based on observed failures" (source-hubspot BEHAVIOR.md). The sandbox
 * refuses past 16,384.
 */
export const MAX_URL_LENGTH = 15_000;

export interface HubSpotClientOptions {
  /** `https://api.hubapi.com`, or a sandbox's URL. */
  baseUrl: string;
  /** A private app's access token or an OAuth access token: sent only as `Authorization: Bearer`. */
  token: string;
  /** The account whose limits the calls spend: one pace per account and process. */
  account: string;
  /** The worker's leased budget; without one, the account's headers pace this process. */
  pacer?: BudgetPacer;
  limits?: HubSpotLimitOptions;
  searchesPerSecond?: number;
  maxUrlLength?: number;
  timeoutMs?: number;
  fetch?: typeof fetch;
}

type Params = Record<string, string | number | undefined>;

/** One pacer per account and process when no leased budget is handed in (as the crm source's). */
const pacers = new Map<string, HeaderBudgetPacer>();

/**
 * HubSpot's API on the SDK's source client: every answer classified once there (5xx and timeouts
 * transient, 429 rate limited until what its policy says, other 4xx permanent), the token only in a
 * header, every call on a slot of the account's budget, and searches also on their own pace.
 */
export class HubSpotClient {
  readonly maxUrlLength: number;
  private readonly source: SourceClient;
  private readonly searchPace: SearchPace;
  private readonly shared: Omit<ConstructorParameters<typeof SourceClient>[0], "fetch">;
  private readonly fetchImpl: typeof fetch;

  constructor(options: HubSpotClientOptions) {
    let pacer = options.pacer;
    if (!pacer) {
      pacer = pacers.get(options.account) ?? new HeaderBudgetPacer();
      pacers.set(options.account, pacer as HeaderBudgetPacer);
    }
    this.fetchImpl = options.fetch ?? fetch;
    this.shared = {
      baseUrl: options.baseUrl,
      apiToken: options.token,
      adapter: hubspotAdapter(options.limits),
      pacer,
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
    };
    this.source = new SourceClient({ ...this.shared, fetch: this.fetchImpl });
    this.searchPace = searchPaceOf(options.account, options.searchesPerSecond ?? SEARCHES_PER_SECOND);
    this.maxUrlLength = options.maxUrlLength ?? MAX_URL_LENGTH;
  }

  /** The length of the URL a GET of `path` with `params` sends (what the URL limit is held to). */
  urlLength(path: string, params: Params): number {
    const url = new URL(this.shared.baseUrl.replace(/\/+$/, "") + path);
    for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.set(k, String(v));
    return url.pathname.length + url.search.length;
  }

  async get<T>(path: string, params: Params, type: CallType, signal?: AbortSignal): Promise<T> {
    const length = this.urlLength(path, params);
    // A request past the limit would be refused (414) whatever its retries: a defect of the caller's
    // batching, said here rather than spent on the account's allowance.
    if (length > this.maxUrlLength)
      throw new PermanentError(
        `${path}: a request URL of ${length} characters is past the ${this.maxUrlLength} limit`,
      );
    return this.source.getJson<T>(path, params, type, signal);
  }

  /**
   * A POST read (batch read, search, associations): HubSpot takes these reads as POSTs with a JSON
   * body. The SDK's source client sends GETs only, so the POST goes through it with a fetch that
   * carries the method and the body: the same slots, classification, resends (these POSTs read and
   * change nothing, so sending one again is harmless) and token redaction as every GET.
   */
  async post<T>(path: string, body: unknown, type: CallType, signal?: AbortSignal): Promise<T> {
    const json = JSON.stringify(body);
    const fetchImpl = this.fetchImpl;
    const asPost: typeof fetch = (input, init) =>
      fetchImpl(input, {
        ...init,
        method: "POST",
        body: json,
        headers: { ...(init?.headers as Record<string, string>), "content-type": "application/json" },
      });
    return new SourceClient({ ...this.shared, fetch: asPost }).getJson<T>(path, {}, type, signal);
  }

  /** The account's searches this process knows were answered in the last second. */
  recentSearches(): SearchMark[] {
    return this.searchPace.answeredLastSecond();
  }

  /** Counts searches another process answered (SearchPace.remember). */
  rememberSearches(marks: readonly (SearchMark | number)[]): void {
    this.searchPace.remember(marks);
  }

  /** A search, on the search endpoints' own pace as well as the account's budget. */
  async search<T>(path: string, body: unknown, signal?: AbortSignal): Promise<T> {
    return this.searchPace.run(() => this.post<T>(path, body, "search", signal), signal);
  }
}
