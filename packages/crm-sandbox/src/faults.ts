import { unit } from "./prng.js";

export interface FaultSettings {
  seed: number;
  latencyMs: number;
  latencyJitterMs: number;
  transientErrorRate: number;
}

export interface TransientFault {
  status: 502 | 503;
  contentType: string;
  body: string;
}

export interface FaultPlan {
  delayMs: number;
  transient: TransientFault | null;
}

const gatewayPage = (status: number, title: string): string =>
  `<html>\r\n<head><title>${status} ${title}</title></head>\r\n<body>\r\n<center><h1>${status} ${title}</h1></center>\r\n</body>\r\n</html>\r\n`;

/**
 * Decides latency and transient failures from the seed and a counter of admitted requests, never
 * from Math.random, so a sequential client sees the same failures at the same calls on every run.
 */
export class Faults {
  private counter = 0;

  private readonly settings: FaultSettings;

  constructor(settings: FaultSettings) {
    this.settings = { ...settings };
  }

  /** Changes latency or the transient error rate while the server runs (tests turn an outage on and off). */
  update(change: Partial<Omit<FaultSettings, "seed">>): FaultSettings {
    for (const [k, v] of Object.entries(change)) {
      if (v === undefined) continue;
      if (!Number.isFinite(v) || v < 0 || (k === "transientErrorRate" && v > 1))
        throw new Error(`${k} must be a number >= 0${k === "transientErrorRate" ? " and <= 1" : ""}`);
      (this.settings as unknown as Record<string, number>)[k] = v;
    }
    return { ...this.settings };
  }

  next(): FaultPlan {
    const n = this.counter++;
    const s = this.settings;
    const jitter =
      s.latencyJitterMs > 0 ? Math.floor(unit(s.seed, "faults/jitter", n) * (s.latencyJitterMs + 1)) : 0;
    const delayMs = s.latencyMs + jitter;
    if (s.transientErrorRate <= 0 || unit(s.seed, "faults/transient", n) >= s.transientErrorRate) {
      return { delayMs, transient: null };
    }
    const how = unit(s.seed, "faults/transient-kind", n);
    const status = how < 0.5 ? 502 : 503;
    // Proxies in front of the API answer with HTML; the API itself with JSON. Clients meet both.
    const html = how < 0.25 || how >= 0.75;
    return {
      delayMs,
      transient: html
        ? {
            status,
            contentType: "text/html",
            body: gatewayPage(status, status === 502 ? "Bad Gateway" : "Service Temporarily Unavailable"),
          }
        : {
            status,
            contentType: "application/json",
            body: JSON.stringify({
              success: false,
              error: "Service temporarily unavailable",
              errorCode: status,
            }),
          },
    };
  }
}
