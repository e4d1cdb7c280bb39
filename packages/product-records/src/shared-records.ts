import type { SampleEntry, VerifyContext } from "@drover/provider-sdk";

/**
 * Verifying a record several source rows share (persons sharing an email: the first creates the
 * contact, the others are matched to it) by the rule the writer applied to it.
 */

type Obj = Record<string, unknown>;

/**
 * The created records among the sample that other source rows are matched to (persons sharing an
 * email): one query on the ledger's record index.
 */
export async function sharedRecords(
  ctx: VerifyContext,
  entries: readonly SampleEntry[],
): Promise<Set<string>> {
  const created = entries.filter((e) => e.action === "created");
  if (created.length === 0) return new Set();
  return ctx.ledger.matchedRecordIds(
    created[0]!.recordType,
    created.map((e) => String(e.recordId)),
  );
}

/**
 * A shared record's value as its creating row alone would have left it: the writer lets a row
 * matched to the record fill what is empty there (ownership.ts), so where the creating row has
 * nothing (a field, or a custom field's key) a value is a sharer's fill, not a mismatch. Whatever
 * the creating row does say must still be there: a fill never overwrites.
 */
export function unfilled(source: unknown, stored: unknown): unknown {
  if (isEmptyValue(source)) return source;
  if (!isPlainObject(source) || !isPlainObject(stored)) return stored;
  const own = Object.entries(stored).filter(([key]) => !isEmptyValue(source[key]));
  // Keys the creating row sends empty stay as it sent them, so only what it says is compared.
  const sentEmpty = Object.entries(source).filter(([, v]) => isEmptyValue(v));
  return Object.fromEntries([...own, ...sentEmpty]);
}

function isEmptyValue(v: unknown): boolean {
  if (v === null || v === undefined || v === "") return true;
  if (Array.isArray(v)) return v.length === 0;
  return isPlainObject(v) && Object.keys(v).length === 0;
}

function isPlainObject(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date);
}
