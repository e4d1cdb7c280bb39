import { randomBytes } from "node:crypto";
import { type Sandbox, type SandboxOptions, startSandbox } from "@drover/crm-sandbox";
import { type DryRunKind, type Run, RunStatus, timestampDate } from "@drover/proto";
import { sources as providers } from "@drover/source-registry";
import { sql } from "drizzle-orm";
import { expect } from "vitest";
import { API_TOKEN, type Cluster, TERMINAL } from "../support/in-process.js";
import { PRODUCT_TABLES, type ProductTable, productContent } from "../support/product-tables.js";

/**
 * The plain model the generated sequences are checked against, and the checks themselves.
 *
 * The model does not re-implement the writers: what the product must hold for the account as it
 * is after `round` rounds of changes is what one clean import of it gives (a reference tenant,
 * imported once per round and sequence, round 0 once for all). The model says which of those the
 * tenant must equal (or that it must be empty, or that it is mid-run and only the invariants
 * hold), which run's records are in the product, what is live, and what the last dry run said the
 * next real run would do.
 */

/**
 * A tiny account: tens of rows in all, zero latency, a few malformed rows to re-drive, one row of
 * each change per round. Seed 89: person 2 shares person 1's email (matched to the contact created
 * for person 1), the case a revert once left pointing at nothing; the rounds edit person 1 and
 * delete persons 5 and 4. (A round deleting a person matched to another's contact is left out:
 * the follow run keeps its deals linked to that contact, which still lives, while a clean import
 * no longer sees the person and links them to nothing, so the two differ by design.)
 */
export const ACCOUNT: SandboxOptions = {
  seed: 89,
  organizations: 3,
  persons: 5,
  deals: 4,
  leads: 3,
  activities: 4,
  notes: 3,
  mailPerDealMax: 1,
  heavyMailDealRate: 0,
  malformedRate: 0.15,
  changeEdits: 1,
  changeAdds: 1,
  changeDeletes: 1,
};
export const SETTINGS = { pageSize: "50", stripes: "1" };
/** Rounds of changes a sequence may apply while a follow run is live. */
export const MAX_ROUNDS = 2;

export interface Model {
  /** Rounds of changes applied at the source. */
  round: number;
  /** The round whose reference the product equals, "empty", or "partial" (a stopped run's part). */
  product: number | "empty" | "partial";
  /** A run that is not finished: a follow run, or a stopped run. */
  live: { id: string; follow: boolean; stopped: boolean } | null;
  /** The run whose created records are in the product. */
  owner: string | null;
  /** Finished import runs not reverted: their counts must equal the ledger. */
  runs: string[];
  /** The last dry run's report, while nothing changed since: what the next real run must do. */
  prediction: DryRunKind[] | null;
}

export function initialModel(): Model {
  return { round: 0, product: "empty", live: null, owner: null, runs: [], prediction: null };
}

interface Reference {
  content: Record<ProductTable, string[]>;
  run: Run;
}

/** Round 0's reference, the same for every sequence (every sandbox serves the same seed). */
let roundZero: Promise<Reference> | undefined;

/** One sequence's world: the shared cluster, a sandbox and a tenant of its own. */
export class World {
  readonly tenant = `m${randomBytes(5).toString("hex")}`;
  readonly account = `acct-${this.tenant}`;
  private readonly refs = new Map<number, Promise<Reference>>();

  private constructor(
    readonly c: Cluster,
    readonly sandbox: Sandbox,
  ) {}

  static async open(c: Cluster): Promise<World> {
    return new World(c, await startSandbox({ ...ACCOUNT, tokens: [API_TOKEN] }));
  }

  async close(): Promise<void> {
    await this.sandbox.close();
  }

  /** Starts a run of this sequence's tenant against its sandbox. */
  async start(options: { follow?: boolean; dryRun?: boolean; tenant?: string } = {}): Promise<Run> {
    const { run } = await this.c.client.startRun({
      tenantId: options.tenant ?? this.tenant,
      source: "crm",
      sourceAccount: this.account,
      sourceConfig: { baseUrl: this.sandbox.url, apiToken: API_TOKEN, settings: SETTINGS },
      dryRun: options.dryRun ?? false,
      ...(options.follow ? { follow: true, followIntervalSeconds: 1 } : {}),
    });
    return run!;
  }

  async getRun(runId: string): Promise<Run> {
    return (await this.c.client.getRun({ runId })).run!;
  }

  async finished(runId: string, timeoutMs = 60_000): Promise<Run> {
    return until(
      async () => {
        const run = await this.getRun(runId);
        return TERMINAL.includes(run.status) ? run : undefined;
      },
      timeoutMs,
      `run ${runId} to finish`,
    );
  }

  /** Waits for the run's automatic verification and expects it ok. */
  async expectVerified(runId: string): Promise<void> {
    const run = await until(
      async () => {
        const r = await this.getRun(runId);
        return r.verification ? r : undefined;
      },
      60_000,
      `run ${runId} to be verified`,
    );
    const v = run.verification!;
    expect(v.kinds.flatMap((k) => k.mismatches.map((m) => `${k.kind} ${m}`))).toEqual([]);
    expect(v.error).toBe("");
    expect(v.ok).toBe(true);
  }

  /** What one clean import of the account after `round` rounds gives. */
  reference(round: number): Promise<Reference> {
    if (round === 0) roundZero ??= this.importReference(0);
    const cached = round === 0 ? roundZero! : this.refs.get(round);
    if (cached) return cached;
    const made = this.importReference(round);
    this.refs.set(round, made);
    return made;
  }

  private async importReference(round: number): Promise<Reference> {
    const tenant = `${this.tenant}-ref${round}`;
    const run = await this.finished((await this.start({ tenant })).id);
    expect(run.status, `reference import of round ${round}`).toBe(RunStatus.SUCCEEDED);
    return { content: await productContent(this.c.database.db, tenant, { live: true }), run };
  }
}

/** Polls `fn` every 20 ms (a sequence waits on many short steps) until it returns something truthy. */
export async function until<T>(
  fn: () => Promise<T> | T,
  timeoutMs: number,
  what: string,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = await fn();
    if (got) return got as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Applies the next round of changes at the sandbox and returns when it applied. */
export async function changeRound(world: World, first: boolean): Promise<Date> {
  const res = await fetch(`${world.sandbox.url}/__sandbox/changes${first ? "" : "?again=1"}`, {
    method: "POST",
  });
  const body = (await res.json()) as { applied: boolean; at: string };
  expect(body.applied).toBe(true);
  return new Date(body.at);
}

/** Waits until a pass of the follow run that began after `after` has finished. */
export async function passFinishedAfter(world: World, runId: string, after: Date): Promise<void> {
  await until(
    async () => {
      const run = await world.getRun(runId);
      return run.follow?.passes.some(
        (p) => p.finishedAt && p.startsAt && timestampDate(p.startsAt).getTime() > after.getTime(),
      );
    },
    60_000,
    `a pass of ${runId} begun after ${after.toISOString()} to finish`,
  );
}

/** The checks after every step: the product, the ledger and the counts against the model. */
export async function checkInvariants(model: Model, world: World): Promise<void> {
  const db = world.c.database.db;
  if (model.product === "empty") {
    const content = await productContent(db, world.tenant);
    for (const table of PRODUCT_TABLES) expect(content[table], `${table} is empty`).toEqual([]);
  } else if (typeof model.product === "number") {
    const want = (await world.reference(model.product)).content;
    const have = await productContent(db, world.tenant, { live: true });
    for (const table of PRODUCT_TABLES)
      expect(have[table], `${table} of round ${model.product}`).toEqual(want[table]);
  }
  // Every ledger row points at a record that exists (a released row is gone from the ledger).
  const { tables } = providers.get("crm")!.productRecords!;
  for (const [recordType, table] of Object.entries(tables)) {
    const dangling = await db.execute<{ kind: string; source_id: string; action: string }>(sql`
      select l.kind, l.source_id, l.action from drover.ledger l
       where l.tenant_id = ${world.tenant} and l.record_type = ${recordType} and l.record_id is not null
         and not exists (select 1 from ${sql.raw(table)} p where p.id = l.record_id and p.tenant_id = l.tenant_id)`);
    expect(dangling, `ledger rows pointing at no ${recordType}`).toEqual([]);
  }
  // GetRun's counts of every finished import run equal its ledger rows, kind by kind.
  for (const runId of model.runs) {
    const run = await world.getRun(runId);
    const ledger = await db.execute<{ kind: string; action: string; n: number }>(sql`
      select kind, action, count(*)::int as n from drover.ledger where run_id = ${runId}::uuid group by kind, action`);
    const count = (kind: string, action: string) =>
      ledger.find((l) => l.kind === kind && l.action === action)?.n ?? 0;
    for (const p of run.progress) {
      expect(
        {
          kind: p.kind,
          imported: Number(p.imported),
          matched: Number(p.matched),
          skipped: Number(p.skipped),
        },
        `run ${runId}`,
      ).toEqual({
        kind: p.kind,
        imported: count(p.kind, "created"),
        matched: count(p.kind, "matched"),
        skipped: count(p.kind, "skipped"),
      });
    }
  }
  // Nothing is live that the model does not know of.
  const live = await db.execute<{ id: string }>(sql`
    select id::text from drover.runs where tenant_id = ${world.tenant} and status in ('pending', 'running', 'stopping')
       and not dry_run`);
  expect(live.map((r) => r.id)).toEqual(model.live && !model.live.stopped ? [model.live.id] : []);
}

/** A real run's outcome as a dry run reports it, kind by kind. */
export function asPrediction(run: Run): { kind: string; create: number; fail: number }[] {
  return run.progress
    .filter((p) => p.kind !== "catch-up")
    .map((p) => ({ kind: p.kind, create: Number(p.imported), fail: Number(p.failed) }));
}

export function predicted(kinds: readonly DryRunKind[]): { kind: string; create: number; fail: number }[] {
  return kinds
    .filter((k) => k.kind !== "catch-up")
    .map((k) => ({ kind: k.kind, create: Number(k.wouldCreate), fail: Number(k.wouldFail) }));
}
