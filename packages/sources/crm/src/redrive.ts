import {
  PermanentError,
  REDRIVE_SEED_KEY_PREFIX,
  type RowRedrive,
  type SourceRow,
  type TaskContext,
  type TaskResult,
} from "@drover/provider-sdk";
import { clientFor } from "./client.js";
import { runSettings } from "./config.js";
import { KIND_LISTS } from "./lists.js";
import { mailRedriveSeeds } from "./mail-redrive.js";
import { IDS_PER_REQUEST, readRowsAgain } from "./rows-by-ids.js";
import { COMPARED } from "./verifier.js";

/** Rows one re-drive task reads and writes: one `ids` request on a v2 kind. */
const ROWS_PER_TASK = IDS_PER_REQUEST;

/** A re-drive task's cursor: the rows to read again, in the order they are written. */
export interface RedriveCursor {
  redrive: string[];
}

export function isRedriveCursor(cursor: Record<string, unknown>): boolean {
  return Array.isArray(cursor.redrive);
}

/**
 * Re-drive for the crm: v2 kinds are read a hundred rows a request through the lists' `ids`
 * filter where that costs fewer tokens than a GET each (readRowsAgain), v1 kinds (leads, notes)
 * one GET by id each, as the verifier reads its sample. Mail is
 * read by listing: a message's GET by id names no deal, and the deal whose list holds it is what
 * links it, so its re-drive lists the noting task's deals again (mail-redrive.ts).
 */
export const crmRedrive: RowRedrive = {
  reads(kind) {
    return kind === "mail" ? "by-listing" : "by-id";
  },
  refuses(kind) {
    if (kind === "mail") return undefined;
    if (!COMPARED[kind] || !KIND_LISTS[kind]) return `the crm source has no rows of kind "${kind}"`;
    return undefined;
  },
  seeds(kind, rows, key) {
    if (kind === "mail") return mailRedriveSeeds(rows, key);
    const sourceIds = rows.map((r) => r.sourceId);
    const seeds = [];
    for (let i = 0; i < sourceIds.length; i += ROWS_PER_TASK) {
      const cursor: RedriveCursor = { redrive: sourceIds.slice(i, i + ROWS_PER_TASK) };
      seeds.push({
        kind,
        seedKey: `${REDRIVE_SEED_KEY_PREFIX}${key}:${kind}:${i / ROWS_PER_TASK}`,
        cursor: { ...cursor },
      });
    }
    return seeds;
  },
};

/**
 * A re-drive task: its rows fetched by id and written through the ledger like a first pass's, in
 * the cursor's order (so a retry's processed offset means the same rows). A row the ledger holds
 * already is written as nothing; a skipped placeholder is taken over by the ledger's claim. A row
 * the source no longer has is a row error, noted again.
 */
export async function redriveRows(
  ctx: TaskContext,
  parse: (raw: unknown) => unknown,
  write: (rows: readonly SourceRow<unknown>[]) => Promise<unknown>,
): Promise<TaskResult> {
  const { redrive: ids } = ctx.task.cursor as unknown as RedriveCursor;
  const check = COMPARED[ctx.task.kind];
  if (!check) throw new PermanentError(`crm provider cannot re-drive kind "${ctx.task.kind}"`);
  const { baseUrl } = runSettings(ctx.run);
  const client = clientFor(ctx.run, baseUrl, ctx.pacer);
  const { raws, gone } = await readRowsAgain(client, ctx.task.kind, check, ids, {
    signal: ctx.signal,
    onRow: () => ctx.working(),
  });
  const rows: SourceRow<unknown>[] = ids.map((id) => {
    const raw = raws.get(id);
    if (raw === undefined)
      return {
        sourceId: id,
        data: {
          rowError: gone.has(id) ? "no longer in the source (404)" : "the source answered without the row",
        },
      };
    try {
      return { sourceId: id, data: parse(raw) };
    } catch (err) {
      return { sourceId: id, data: { rowError: (err as Error).message } };
    }
  });
  await write(rows);
  return {};
}
