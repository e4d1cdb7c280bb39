import { randomUUID } from "node:crypto";
import {
  type HubSpotSandbox,
  type SandboxOptions,
  type SandboxRuntime,
  startSandbox,
} from "@drover/hubspot-sandbox";
import type { BudgetPacer, PacedAnswer } from "@drover/provider-sdk";
import { afterAll } from "vitest";
import { HubSpotClient, type HubSpotClientOptions } from "../src/index.js";

const open: HubSpotSandbox[] = [];

afterAll(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

/** The real HubSpot sandbox, in process on a free port, closed after the file's tests. */
export async function sandbox(
  options: SandboxOptions = {},
  runtime: SandboxRuntime = {},
): Promise<HubSpotSandbox> {
  const s = await startSandbox({ port: 0, tenSecondLimit: 100_000, ...options }, runtime);
  open.push(s);
  return s;
}

/** A client of its own account (its own pace), so tests do not pace each other. */
export function clientOf(s: HubSpotSandbox, options: Partial<HubSpotClientOptions> = {}): HubSpotClient {
  return new HubSpotClient({ baseUrl: s.url, token: "pat-test", account: randomUUID(), ...options });
}

/**
 * A pacer that lets every call go and keeps what each answer said: for tests that must meet a 429
 * (a pacer reading the headers would wait instead) and look at the readings.
 */
export class RecordingPacer implements BudgetPacer {
  readonly graceMs = Number.POSITIVE_INFINITY;
  readonly answers: PacedAnswer[] = [];
  async acquire(_cost: number, _signal?: AbortSignal, count = 1): Promise<number[]> {
    return Array.from({ length: count }, () => Date.now());
  }
  absorb(answer: PacedAnswer): void {
    this.answers.push(answer);
  }
}

/** The ids of `rows`' records, sorted. */
export function idsOf(rows: readonly ({ record: { id: string } } | object)[]): string[] {
  return rows.flatMap((r) => ("record" in r ? [(r as { record: { id: string } }).record.id] : [])).sort();
}
