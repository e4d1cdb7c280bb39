import { type Queryable, type RunRow, taskStatus } from "@drover/db";
import {
  type BudgetPacer,
  PermanentError,
  type Provider,
  type SampleEntry,
  type SlotVerification,
  type VerifyContext,
} from "@drover/provider-sdk";
import { redactSecret } from "@drover/provider-sdk/engine";
import { sql } from "drizzle-orm";
import { toRunInfo } from "./run-info.js";
import { verifyCapabilities } from "./source-capabilities.js";

export interface KindVerificationResult {
  kind: string;
  /** Rows the source lists now. */
  sourceCount: number;
  /** Ledger rows of the tenant and source account for the kind: created + matched + skipped. */
  ledgerCount: number;
  /** Source ids with an error note from this run and no ledger row. */
  failedCount: number;
  /** Ledger rows fetched from the source again and compared with their destination record. */
  sampled: number;
  /** Every discrepancy, each starting with the source id it concerns. */
  mismatches: string[];
  /** Sources without a ledger: per-slot counts. ledgerCount then counts destination rows. */
  slots?: SlotVerification[];
}

export interface VerificationResult {
  ok: boolean;
  verifiedAt: Date;
  kinds: KindVerificationResult[];
  /** Set when the verification could not finish; ok is then false. */
  error?: string;
}

export interface VerifyRunOptions {
  /** Ledger rows per kind compared field by field with the source. */
  sampleSize: number;
  /** The source account's shared budget. */
  pacer?: BudgetPacer | undefined;
  /** The run's source credential, opened by the caller (openSourceSecret). */
  secret?: string | undefined;
  signal?: AbortSignal;
}

/**
 * Checks a finished run against its source, kind by kind:
 * - the source's rows against the ledger plus the rows this run noted as failed: every source id
 *   is in one of them (nothing lost), every ledger row's id is in the source (nothing unexpected),
 *   and the counts agree. The source's rows are what the import listed, checked against the
 *   source's cheap count where it has one; the source is listed again only where that cannot
 *   answer (sourceIdsOf), so verifying costs a fraction of an import, not a second one;
 * - a sample of the ledger's created and matched rows, fetched from the source again and compared
 *   field by field with the destination record the ledger points to.
 * Every mismatch is listed, with its ids. Throws when the source cannot be read (the caller decides
 * whether to try again); never writes.
 */
export async function verifyRun(
  db: Queryable,
  provider: Provider,
  run: RunRow,
  options: VerifyRunOptions,
): Promise<VerificationResult> {
  const secret = options.secret;
  try {
    const result = await verifyKinds(db, provider, run, options);
    for (const k of result.kinds) k.mismatches = k.mismatches.map((m) => redactSecret(m, secret));
    return result;
  } catch (err) {
    // A source that echoes the token (in a 4xx body, say) must not put it into what is stored or logged.
    for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
      const clean = redactSecret(e.message, secret);
      if (clean !== e.message) e.message = clean;
    }
    throw err;
  }
}

async function verifyKinds(
  db: Queryable,
  provider: Provider,
  run: RunRow,
  options: VerifyRunOptions,
): Promise<VerificationResult> {
  const verifier = provider.verifier;
  if (!verifier) throw new PermanentError(`source "${provider.name}" cannot be verified`);
  const signal = options.signal ?? new AbortController().signal;
  const runInfo = { ...toRunInfo(run), secret: options.secret };
  const ctx = {
    run: runInfo,
    signal,
    pacer: options.pacer,
    db,
    memo: new Map<string, unknown>(),
    ...verifyCapabilities(db, runInfo),
  };
  const kinds: KindVerificationResult[] = [];
  // A closing kind (the crm's catch-up) is a pass over the other kinds, not rows of its own.
  const closing = new Set(provider.closingKinds ?? []);
  for (const kind of run.plan.flat()) {
    if (closing.has(kind)) continue;
    signal.throwIfAborted();
    if ((provider.ledger ?? "per-row") === "none") {
      kinds.push(await verifyLedgerlessKind(db, provider, run, kind, ctx, options.sampleSize));
      continue;
    }
    const held = await db.execute<{
      source_id: string;
      action: string;
      record_type: string | null;
      record_id: string | null;
      source_deleted: boolean;
    }>(sql`
      select source_id, action, record_type, record_id::text as record_id,
             source_deleted_at is not null as source_deleted from drover.ledger
       where tenant_id = ${run.tenantId} and source = ${run.source} and source_account = ${run.sourceAccount}
         and kind = ${kind}`);
    // Rows a follow pass found deleted at the source (source-deletions.ts) are not the source's any
    // more: neither expected in it nor counted, whatever listing the import kept of them.
    const deleted = new Set(held.filter((l) => l.source_deleted).map((l) => l.source_id));
    const { sourceIds, notes } = await sourceIdsOf(db, provider, run, kind, ctx, deleted);
    // A skipped placeholder holds no record: once the source no longer lists its row (deleted
    // there; the deletion sweep looks only at rows with a record), the product is right without
    // it, and it is neither expected in the source nor counted.
    const ledger = held.filter(
      (l) => !deleted.has(l.source_id) && (l.action !== "skipped" || sourceIds.has(l.source_id)),
    );
    const failed = await db.execute<{ subject_id: string }>(sql`
      select distinct n.subject_id from drover.notes n
       where n.run_id = ${run.id}::uuid and n.kind = ${kind} and n.level = 'error' and n.subject_id is not null
         and not exists (select 1 from drover.ledger l
                          where l.tenant_id = ${run.tenantId} and l.source = ${run.source}
                            and l.source_account = ${run.sourceAccount} and l.kind = ${kind}
                            and l.source_id = n.subject_id)`);
    const inLedger = new Set(ledger.map((l) => l.source_id));
    const failedIds = new Set(failed.map((f) => f.subject_id));
    const mismatches: string[] = [...notes];
    const accounted = ledger.length + failedIds.size;
    if (sourceIds.size !== accounted) {
      mismatches.push(
        `the source lists ${sourceIds.size} ${kind}; the ledger holds ${ledger.length} and ${failedIds.size} failed with a reason (${accounted})`,
      );
    }
    for (const id of sourceIds) {
      if (!inLedger.has(id) && !failedIds.has(id))
        mismatches.push(`${id}: in the source, but neither in the ledger nor noted as failed (lost)`);
    }
    for (const l of ledger) {
      if (sourceIds.has(l.source_id)) continue;
      const what = l.action === "skipped" ? "skipped" : `${l.action} as ${l.record_type} ${l.record_id}`;
      mismatches.push(`${l.source_id}: in the ledger (${what}), but not in the source (unexpected)`);
    }
    for (const id of failedIds) {
      if (!sourceIds.has(id)) mismatches.push(`${id}: noted as failed, but not in the source (unexpected)`);
    }

    let sampled = 0;
    if (options.sampleSize > 0) {
      // A fixed order per run: verifying the same run twice compares the same rows.
      const sample = await db.execute<{
        source_id: string;
        action: "created" | "matched";
        record_type: string;
        record_id: string;
      }>(sql`
        select source_id, action, record_type, record_id::text as record_id from drover.ledger
         where tenant_id = ${run.tenantId} and source = ${run.source} and source_account = ${run.sourceAccount}
           and kind = ${kind} and action in ('created', 'matched') and record_id is not null
           and source_deleted_at is null
         order by md5(${run.id} || source_id)
         limit ${Math.max(0, Math.min(options.sampleSize, verifier.sampleLimit?.(kind, options.sampleSize) ?? options.sampleSize))}`);
      const entries: SampleEntry[] = sample.map((s) => ({
        sourceId: s.source_id,
        action: s.action,
        recordType: s.record_type,
        recordId: Number(s.record_id),
      }));
      sampled = entries.length;
      for (const m of await verifier.compareSample(ctx, kind, entries))
        mismatches.push(`${m.sourceId}: ${m.problem}`);
    }
    kinds.push({
      kind,
      sourceCount: sourceIds.size,
      ledgerCount: ledger.length,
      failedCount: failedIds.size,
      sampled,
      mismatches,
    });
  }
  return { ok: kinds.every((k) => k.mismatches.length === 0), verifiedAt: new Date(), kinds };
}

/**
 * The source's ids of `kind`, as cheaply as they can be known honestly:
 * - what the import listed (every task's `listed_ids`, committed with the windows that wrote those
 *   rows), when every task of the kind succeeded under a version that records it. That proves
 *   every row the import saw is in the ledger or failed with a reason, and every ledger row was
 *   seen; it cannot see a row the import's walk never reached (a page the source skipped, a row
 *   added after the walk and the catch-up passed). So,
 * - where the source offers a cheap count (`sourceCount`), it is checked against that listing;
 *   when they differ the source is listed again (`sourceIds`) to name the rows that differ;
 * - without a complete listing (no task of the kind, a run from before it was kept, a task that
 *   failed or was cancelled mid-listing), the source is listed again.
 * `notes` are mismatch lines the caller reports (a count that disagreed).
 */
async function sourceIdsOf(
  db: Queryable,
  provider: Provider,
  run: RunRow,
  kind: string,
  ctx: VerifyContext,
  deleted: ReadonlySet<string>,
): Promise<{ sourceIds: Set<string>; notes: string[] }> {
  const live = (ids: Iterable<string>) => new Set([...ids].filter((id) => !deleted.has(id)));
  const verifier = provider.verifier!;
  const [tasks] = await db.execute<{ total: number; unlisted: number }>(sql`
    select count(*)::int as total,
           (count(*) filter (where status <> ${taskStatus.succeeded} or listed_ids is null))::int as unlisted
      from drover.tasks where run_id = ${run.id}::uuid and kind = ${kind}`);
  if (!tasks || tasks.total === 0 || tasks.unlisted > 0)
    return { sourceIds: live(await verifier.sourceIds(ctx, kind)), notes: [] };
  const listed = await db.execute<{ id: string }>(sql`
    select distinct x.id from drover.tasks t, unnest(t.listed_ids) as x(id)
     where t.run_id = ${run.id}::uuid and t.kind = ${kind}`);
  const sourceIds = live(listed.map((r) => r.id));
  const count = await verifier.sourceCount?.(ctx, kind);
  if (count === undefined || count === sourceIds.size) return { sourceIds, notes: [] };
  return {
    sourceIds: live(await verifier.sourceIds(ctx, kind)),
    notes: [
      `the source counts ${count} ${kind} now, the import listed ${sourceIds.size}: listed again to name the rows that differ`,
    ],
  };
}

/**
 * A kind written without a ledger: nothing in drover.ledger to compare with, so the provider
 * compares its source with the destination (per slot); the rows this run noted as failed are
 * accounted for by their notes, as with a ledger, unless a re-drive wrote them since (settled_at).
 */
async function verifyLedgerlessKind(
  db: Queryable,
  provider: Provider,
  run: RunRow,
  kind: string,
  ctx: VerifyContext,
  sampleSize: number,
): Promise<KindVerificationResult> {
  const verifyKind = provider.verifier?.verifyKind;
  if (!verifyKind)
    throw new PermanentError(`source "${provider.name}" keeps no ledger and cannot verify a kind itself`);
  const failed = await db.execute<{ subject_id: string }>(sql`
    select distinct subject_id from drover.notes
     where run_id = ${run.id}::uuid and kind = ${kind} and level = 'error' and subject_id is not null
       and settled_at is null`);
  const r = await verifyKind.call(provider.verifier, ctx, kind, {
    sampleSize,
    failedIds: new Set(failed.map((f) => f.subject_id)),
  });
  return {
    kind,
    sourceCount: r.sourceCount,
    ledgerCount: r.destinationCount,
    failedCount: r.failedCount,
    sampled: r.sampled,
    mismatches: r.mismatches,
    slots: r.slots,
  };
}
