import type { Tx } from "@drover/db/connection";
import type { HeldSlot, RowResult } from "@drover/provider-sdk";
import { and, eq } from "drizzle-orm";
import type { PgColumn, PgTable } from "drizzle-orm/pg-core";

/**
 * A source row applied again (the catch-up pass) to the record the ledger holds for it. Ownership
 * (invariant 8) decides what it may do there:
 * - a record Drover created is Drover's: it is updated in place with what the source says now;
 * - a record Drover matched (a contact the product already had, or one a person sharing its email
 *   became) belongs to someone else: a field that is empty there is filled, one that holds a value
 *   is never overwritten, and the row's note says which were filled and which were kept.
 * Custom fields are one jsonb column of many fields: each key is a field of its own here.
 */

/** The columns a row writes, keyed as the table's drizzle fields, plus the id and tenant every product table has. */
type ProductTable = PgTable & { id: PgColumn; tenantId: PgColumn };

export async function applyToHeld(
  tx: Tx,
  table: ProductTable,
  tenantId: string,
  held: HeldSlot,
  recordType: string,
  values: Record<string, unknown>,
): Promise<RowResult> {
  const recordId = held.recordId;
  const where = and(eq(table.id, recordId), eq(table.tenantId, tenantId));
  if (held.action === "created") {
    await tx
      .update(table)
      .set({ ...values, updatedAt: new Date() } as never)
      .where(where);
    return { action: "updated", recordType, recordId };
  }
  const columns = table as unknown as Record<string, PgColumn>;
  const selection = Object.fromEntries(Object.keys(values).map((k) => [k, columns[k]!]));
  // FOR UPDATE: the fill decided here must not race the product's own edit of the same record.
  const [current] = await tx
    .select(selection)
    .from(table as never)
    .where(where)
    .for("update");
  if (!current)
    return {
      action: "updated",
      recordType,
      recordId,
      note: "a matched record is not Drover's, and it is gone from the product: nothing was written",
    };
  const fill: Record<string, unknown> = {};
  const filled: string[] = [];
  const kept: string[] = [];
  for (const [key, value] of Object.entries(values)) {
    const name = columns[key]!.name;
    const have = (current as Record<string, unknown>)[key];
    if (key === "customFields") {
      const merged = fillCustomFields(have, value, filled, kept);
      if (merged) fill[key] = merged;
    } else if (isEmpty(have)) {
      if (!isEmpty(value)) {
        fill[key] = value;
        filled.push(name);
      }
    } else if (!isEmpty(value) && !same(have, value)) kept.push(name);
  }
  if (filled.length > 0)
    await tx
      .update(table)
      .set({ ...fill, updatedAt: new Date() } as never)
      .where(where);
  return { action: "updated", recordType, recordId, ...ownershipNote(filled, kept) };
}

/** The record's custom fields with the source's filled in where the record has none; undefined when nothing is filled. */
function fillCustomFields(
  have: unknown,
  value: unknown,
  filled: string[],
  kept: string[],
): Record<string, unknown> | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const current = typeof have === "object" && have !== null ? (have as Record<string, unknown>) : {};
  const merged = { ...current };
  let changed = false;
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
    if (isEmpty(current[key])) {
      if (isEmpty(v)) continue;
      merged[key] = v;
      filled.push(`custom field ${key}`);
      changed = true;
    } else if (!isEmpty(v) && !same(current[key], v)) kept.push(`custom field ${key}`);
  }
  return changed ? merged : undefined;
}

function ownershipNote(filled: readonly string[], kept: readonly string[]): { note?: string } {
  if (filled.length === 0 && kept.length === 0) return {};
  const parts: string[] = [];
  if (kept.length > 0) parts.push(`kept its ${kept.join(", ")} (not overwritten with the source's)`);
  if (filled.length > 0) parts.push(`filled its empty ${filled.join(", ")}`);
  return { note: `a matched record is not Drover's: ${parts.join("; ")}` };
}

/** Empty is no value at all; false and 0 are values. */
function isEmpty(v: unknown): boolean {
  if (v === null || v === undefined || v === "") return true;
  if (Array.isArray(v)) return v.length === 0;
  if (typeof v === "object" && !(v instanceof Date)) return Object.keys(v).length === 0;
  return false;
}

function same(a: unknown, b: unknown): boolean {
  if (a instanceof Date || b instanceof Date)
    return new Date(a as string).getTime() === new Date(b as string).getTime();
  if (typeof a === "object" || typeof b === "object") return JSON.stringify(a) === JSON.stringify(b);
  return String(a) === String(b);
}
