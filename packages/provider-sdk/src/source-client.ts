import { metrics, type Span, SpanKind, withSpan } from "@drover/telemetry";
import { type BudgetPacer, HeaderBudgetPacer } from "./budget-pacer.js";
import { PermanentError, RateLimitedError, repeatsInPlace, TransientError } from "./errors.js";
import { redactSecret } from "./secret-text.js";
import { sleep } from "./sleep.js";
import type { CallType, SourceAdapter } from "./source-adapter.js";

export interface SourceClientOptions {
  baseUrl: string;
  apiToken: string;
  /** The source's own rules: how the token travels, what calls cost, what answers say of the budget. */
  adapter: SourceAdapter;
  pacer?: BudgetPacer;
  timeoutMs?: number;
  /** Responses larger than this are refused: the source is untrusted. */
  maxResponseBytes?: number;
  fetch?: typeof fetch;
  /**
   * How many times an idempotent request that failed in a way `repeatsInPlace` allows is sent again
   * before its failure reaches the task (default 2: three tries in all).
   */
  resends?: number;
  /** The first resend waits 50-100 % of this, each next one twice as long (default 200 ms). */
  resendBackoffMs?: number;
}

const DEFAULT_RESENDS = 2;
const DEFAULT_RESEND_BACKOFF_MS = 200;

const resent = metrics.counter(
  "drover_source_resends_total",
  "Idempotent source requests sent again after a transient failure, within the task's attempt",
  [],
);

const DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024;
/** A 429 whose answer says no reset: a short pause, after which the pacer learns more. */
const DEFAULT_RATE_LIMIT_WAIT_MS = 2_000;

/**
 * JSON over HTTP to a source, with every failure classified once, here, where it is understood.
 * The token travels in a header, never in a URL that proxies and logs would keep.
 */
export class SourceClient {
  private readonly baseUrl: string;
  private readonly pacer: BudgetPacer;
  private readonly adapter: SourceAdapter;
  private readonly fetchImpl: typeof fetch;

  constructor(private readonly options: SourceClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.pacer = options.pacer ?? new HeaderBudgetPacer();
    this.adapter = options.adapter;
    this.fetchImpl = options.fetch ?? fetch;
  }

  /**
   * Takes `count` slots at once, for requests about to go out in parallel: the task reserves them
   * before its fetches start, then hands one to each getJson.
   */
  reserve(count: number, type: CallType, signal?: AbortSignal, path = ""): Promise<number[]> {
    return this.pacer.acquire(this.adapter.cost(type, path), signal, count);
  }

  /**
   * Waits for the slot's instant; a slot that went stale meanwhile is swapped for a fresh one. A
   * slot before a wall that went up after it was handed out is taken back: the call waits for the
   * wall (the pacer's acquire does) and goes out on a fresh slot, never into the refusal.
   */
  private async awaitSlot(slot: number | undefined, cost: number, signal?: AbortSignal): Promise<void> {
    let at = slot ?? (await this.pacer.acquire(cost, signal, 1))[0]!;
    for (;;) {
      const wait = at - Date.now();
      if (wait > 0) await sleep(wait, signal);
      if (at < (this.pacer.wallUntil?.() ?? 0)) {
        this.pacer.release?.(1, cost, at);
        at = (await this.pacer.acquire(cost, signal, 1))[0]!;
        continue;
      }
      if (Date.now() - at <= this.pacer.graceMs) return;
      // Too late to use: the pacer hears that it went unused, and a fresh one is taken.
      this.pacer.release?.(1, cost, at);
      at = (await this.pacer.acquire(cost, signal, 1))[0]!;
    }
  }

  /**
   * A GET is idempotent, so a failure the same request may get past (`repeatsInPlace`: a 5xx, a
   * dropped connection, a garbled body) is sent again here, after a short jittered backoff, up to
   * `resends` times: one 5xx costs one more request, not the task's attempt and the work it redoes.
   * Each resend takes a slot of its own from the pacer, like any call, so it is paced on the
   * account's budget and never goes out before a wall (a 429's reset); the leased pacer parks the
   * task rather than wait out a long wall. A rate limit is never resent: it parks the task.
   */
  async getJson<T = unknown>(
    path: string,
    params: Record<string, string | number | undefined> = {},
    type: CallType = "list",
    signal?: AbortSignal,
    options: { slot?: number } = {},
  ): Promise<T> {
    const url = new URL(this.baseUrl + path);
    for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.set(k, String(v));
    const resends = this.options.resends ?? DEFAULT_RESENDS;
    const cost = this.adapter.cost(type, path);
    for (let resend = 0; ; resend++) {
      // A slot reserved by the caller serves the first try only; a resend takes a fresh one.
      await this.awaitSlot(resend === 0 ? options.slot : undefined, cost, signal);
      try {
        // The span starts after the slot's wait, so its length is the source's; the path without its
        // query (which may carry cursors and ids) names it, and the token travels in a header only.
        return await withSpan(
          `GET ${path}`,
          {
            "http.request.method": "GET",
            "url.path": url.pathname,
            "drover.call_type": type,
            ...(resend > 0 ? { "http.request.resend_count": resend } : {}),
          },
          (span) => this.send<T>(url, path, cost, signal, span),
          { kind: SpanKind.CLIENT },
        );
      } catch (err) {
        if (resend >= resends || signal?.aborted || !repeatsInPlace(err)) throw err;
        resent.inc({});
        await sleep(this.resendBackoff(resend), signal);
      }
    }
  }

  /**
   * Short and jittered: tasks that met the same hiccup do not come back at the same instant. At
   * the defaults 100-200 ms, then 200-400 ms: well inside any task's time, far less than the task
   * releasing its attempt and redoing its work.
   */
  private resendBackoff(resend: number): number {
    const ceiling = (this.options.resendBackoffMs ?? DEFAULT_RESEND_BACKOFF_MS) * 2 ** resend;
    return ceiling / 2 + Math.random() * (ceiling / 2);
  }

  private async send<T>(
    url: URL,
    path: string,
    cost: number,
    signal: AbortSignal | undefined,
    span: Span,
  ): Promise<T> {
    const timeout = AbortSignal.timeout(this.options.timeoutMs ?? 30_000);
    // A timeout already took the call's whole time, and the task's own abort means stop: neither
    // is resent. A connection refused, reset or cut mid-body is.
    const stopped = () => timeout.aborted || signal?.aborted === true;
    let response: Response;
    try {
      response = await this.fetchImpl(url, {
        headers: { ...this.adapter.authHeaders(this.options.apiToken), accept: "application/json" },
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
    } catch (err) {
      this.pacer.absorb({ status: 0, cost, reading: {} });
      throw new TransientError(`${path}: ${(err as Error).message}`, { cause: err, repeatable: !stopped() });
    }
    span.setAttribute("http.response.status_code", response.status);
    let body: string;
    try {
      // A source may echo the token it was sent (a 401 quoting it, a note a user pasted it into).
      body = redactSecret(await this.readBody(response, path, stopped), this.options.apiToken);
    } catch (err) {
      const reading = this.adapter.readBudget(
        { status: response.status, headers: response.headers },
        cost,
        Date.now(),
      );
      this.pacer.absorb({ status: response.status, cost, reading });
      throw err;
    }
    // Read with the body: a refusal's body may be the only place that says what was refused and until when.
    const reading = this.adapter.readBudget(
      { status: response.status, headers: response.headers, body },
      cost,
      Date.now(),
    );
    const throttled =
      response.status === 429
        ? (reading.blockedUntil ?? Date.now() + DEFAULT_RATE_LIMIT_WAIT_MS)
        : this.edgeBlockedUntil(response, body);
    // The pacer hears of a refusal as a wall on the whole account, not only this call's failure.
    if (throttled !== undefined) reading.blockedUntil = throttled;
    this.pacer.absorb({ status: response.status, cost, reading });
    if (throttled !== undefined) {
      throw new RateLimitedError(
        response.status === 429
          ? `${path}: rate limited (429)`
          : `${path}: the source throttled the call (${response.status})`,
        new Date(throttled),
      );
    }
    if (response.status >= 500 || response.status === 408) {
      throw new TransientError(`${path}: the source answered ${response.status}`, { repeatable: true });
    }
    if (response.status >= 400) {
      throw new PermanentError(`${path}: the source answered ${response.status}: ${body.slice(0, 200)}`);
    }
    try {
      return JSON.parse(body) as T;
    } catch {
      // A truncated or garbled page is usually a proxy hiccup: retry the page, fail after the attempts.
      throw new TransientError(`${path}: the source sent a body that is not JSON (${body.length} bytes)`, {
        repeatable: true,
      });
    }
  }

  /**
   * A refusal other than a 429 (an edge's block page) states no reset of its own: it lasts as long
   * as the wall the account already has (a 429's reset), and only with none the adapter's fallback.
   */
  private edgeBlockedUntil(response: Response, body: string): number | undefined {
    const now = Date.now();
    const fallback = this.adapter.throttledUntil?.(
      { status: response.status, headers: response.headers, body },
      now,
    );
    if (fallback === undefined) return undefined;
    const wall = this.pacer.wallUntil?.() ?? 0;
    return wall > now ? wall : fallback;
  }

  private async readBody(response: Response, path: string, stopped: () => boolean): Promise<string> {
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
        repeatable: !stopped(),
      });
    }
  }
}
