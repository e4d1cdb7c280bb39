import { type Span, SpanKind, withSpan } from "@drover/telemetry";
import { PermanentError, RateLimitedError, TransientError } from "./errors.js";
import { redactSecret } from "./secret-text.js";

export type CallType = "list" | "get" | "update" | "search";

/** Pipedrive's token costs per call type, against the daily allowance. */
export const TOKEN_COSTS: Readonly<Record<CallType, number>> = { list: 20, get: 2, update: 10, search: 40 };

/**
 * Paces calls against the source's allowance. acquire() hands out slots: instants from which a
 * request may be sent, each usable only until `graceMs` after it. absorb() learns from the
 * response's rate-limit headers. The default paces one process by the last headers it saw; a
 * leased budget shared through the coordinator takes its place without touching the providers.
 */
export interface Pacer {
  /** Slot times (epoch ms), one per request, ascending. */
  acquire(type: CallType, signal?: AbortSignal, count?: number): Promise<number[]>;
  /** How late after its time a slot may still be used. */
  readonly graceMs: number;
  /** Learns from a response; `status` 0 means the request never got an answer. */
  absorb(headers: Headers, status: number, type: CallType): void;
}

/** Stays under the burst window by reading x-ratelimit-remaining / x-ratelimit-reset. */
export class HeaderPacer implements Pacer {
  readonly graceMs = Number.POSITIVE_INFINITY;
  private remaining = Number.POSITIVE_INFINITY;
  private resetAt = 0;
  private inFlight = 0;

  async acquire(_type: CallType, signal?: AbortSignal, count = 1): Promise<number[]> {
    for (;;) {
      const now = Date.now();
      if (now >= this.resetAt) this.remaining = Number.POSITIVE_INFINITY;
      if (this.remaining - this.inFlight >= count) {
        this.inFlight += count;
        return Array.from({ length: count }, () => now);
      }
      await sleep(Math.max(50, this.resetAt - now), signal);
    }
  }

  absorb(headers: Headers, _status: number, _type: CallType): void {
    this.inFlight = Math.max(0, this.inFlight - 1);
    const remaining = intHeader(headers, "x-ratelimit-remaining");
    const reset = intHeader(headers, "x-ratelimit-reset");
    if (remaining !== undefined) this.remaining = remaining;
    if (reset !== undefined) this.resetAt = Date.now() + Math.max(reset, 0) * 1000;
  }
}

export interface SourceClientOptions {
  baseUrl: string;
  apiToken: string;
  pacer?: Pacer;
  timeoutMs?: number;
  /** Responses larger than this are refused: the source is untrusted. */
  maxResponseBytes?: number;
  fetch?: typeof fetch;
}

const DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024;

/**
 * JSON over HTTP to a source, with every failure classified once, here, where it is understood.
 * The token travels in a header, never in a URL that proxies and logs would keep.
 */
export class SourceClient {
  private readonly baseUrl: string;
  private readonly pacer: Pacer;
  private readonly fetchImpl: typeof fetch;

  constructor(private readonly options: SourceClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.pacer = options.pacer ?? new HeaderPacer();
    this.fetchImpl = options.fetch ?? fetch;
  }

  /**
   * Takes `count` slots at once, for requests about to go out in parallel: the task reserves them
   * before its fetches start, then hands one to each getJson.
   */
  reserve(count: number, type: CallType, signal?: AbortSignal): Promise<number[]> {
    return this.pacer.acquire(type, signal, count);
  }

  /** Waits for the slot's instant; a slot that went stale meanwhile is swapped for a fresh one. */
  private async awaitSlot(slot: number | undefined, type: CallType, signal?: AbortSignal): Promise<void> {
    let at = slot ?? (await this.pacer.acquire(type, signal, 1))[0]!;
    for (;;) {
      const wait = at - Date.now();
      if (wait > 0) await sleep(wait, signal);
      if (Date.now() - at <= this.pacer.graceMs) return;
      at = (await this.pacer.acquire(type, signal, 1))[0]!;
    }
  }

  async getJson<T = unknown>(
    path: string,
    params: Record<string, string | number | undefined> = {},
    type: CallType = "list",
    signal?: AbortSignal,
    options: { slot?: number } = {},
  ): Promise<T> {
    const url = new URL(this.baseUrl + path);
    for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.set(k, String(v));
    await this.awaitSlot(options.slot, type, signal);
    // The span starts after the slot's wait, so its length is the source's; the path without its
    // query (which may carry cursors and ids) names it, and the token travels in a header only.
    return withSpan(
      `GET ${path}`,
      { "http.request.method": "GET", "url.path": url.pathname, "drover.call_type": type },
      (span) => this.send<T>(url, path, type, signal, span),
      { kind: SpanKind.CLIENT },
    );
  }

  private async send<T>(
    url: URL,
    path: string,
    type: CallType,
    signal: AbortSignal | undefined,
    span: Span,
  ): Promise<T> {
    const timeout = AbortSignal.timeout(this.options.timeoutMs ?? 30_000);
    let response: Response;
    try {
      response = await this.fetchImpl(url, {
        headers: { "x-api-token": this.options.apiToken, accept: "application/json" },
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
    } catch (err) {
      this.pacer.absorb(new Headers(), 0, type);
      throw new TransientError(`${path}: ${(err as Error).message}`, { cause: err });
    }
    this.pacer.absorb(response.headers, response.status, type);
    span.setAttribute("http.response.status_code", response.status);
    // A source may echo the token it was sent (a 401 quoting it, a note a user pasted it into).
    const body = redactSecret(await this.readBody(response, path), this.options.apiToken);
    if (response.status === 429) {
      const reset = intHeader(response.headers, "x-ratelimit-reset") ?? 2;
      throw new RateLimitedError(
        `${path}: rate limited (429)`,
        new Date(Date.now() + Math.max(reset, 1) * 1000),
      );
    }
    if (response.status === 403 && /cloudflare/i.test(body)) {
      // The edge blocks clients that kept sending after a 429: back off hard rather than fail.
      throw new RateLimitedError(
        `${path}: blocked by the source's edge (403)`,
        new Date(Date.now() + 60_000),
      );
    }
    if (response.status >= 500 || response.status === 408) {
      throw new TransientError(`${path}: the source answered ${response.status}`);
    }
    if (response.status >= 400) {
      throw new PermanentError(`${path}: the source answered ${response.status}: ${body.slice(0, 200)}`);
    }
    try {
      return JSON.parse(body) as T;
    } catch {
      // A truncated or garbled page is usually a proxy hiccup: retry the page, fail after the attempts.
      throw new TransientError(`${path}: the source sent a body that is not JSON (${body.length} bytes)`);
    }
  }

  private async readBody(response: Response, path: string): Promise<string> {
    const limit = this.options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    const declared = Number(response.headers.get("content-length") ?? "0");
    if (declared > limit) {
      await response.body?.cancel();
      throw new PermanentError(`${path}: response of ${declared} bytes exceeds the ${limit}-byte limit`);
    }
    try {
      // Counted as it arrives: a chunked body declares no length, and must not be buffered whole first.
      const reader = response.body?.getReader();
      if (!reader) return "";
      const chunks: Uint8Array[] = [];
      let size = 0;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        size += value.byteLength;
        if (size > limit) {
          await reader.cancel().catch(() => {});
          throw new PermanentError(`${path}: response exceeds the ${limit}-byte limit`);
        }
        chunks.push(value);
      }
      return Buffer.concat(chunks).toString("utf8");
    } catch (err) {
      if (err instanceof PermanentError) throw err;
      throw new TransientError(`${path}: reading the response failed: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }
}

function intHeader(headers: Headers, name: string): number | undefined {
  const raw = headers.get(name);
  if (raw === null) return undefined;
  const n = Number.parseInt(raw, 10);
  return Number.isFinite(n) ? n : undefined;
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
