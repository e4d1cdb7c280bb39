import { createHash } from "node:crypto";
import { RowError, type SourceRow } from "@drover/provider-sdk";
import { ASSOCIATION_PAIRS, readAssociations } from "./associations.js";
import type { HubSpotClient } from "./client.js";
import type { ObjectType } from "./object-types.js";
import { keptParent, NO_LINKS, type ProductRow, productRow, type RecordLinks } from "./product-rows.js";
import type { ReadRow } from "./records.js";

/** The parent types a record of `type` links to, read from its side (v4 associations). */
export function parentTypesOf(type: ObjectType): ObjectType[] {
  return ASSOCIATION_PAIRS.filter(([from]) => from === type).map(([, to]) => to);
}

/**
 * The links of a page's records: one v4 batch read per parent type (child side, up to 1,000 ids a
 * request), each record's kept parent per type (keptParent).
 */
export async function pageLinks(
  client: HubSpotClient,
  type: ObjectType,
  ids: readonly string[],
  signal?: AbortSignal,
): Promise<Map<string, RecordLinks>> {
  const out = new Map<string, RecordLinks>();
  if (ids.length === 0) return out;
  const byParent = await Promise.all(
    parentTypesOf(type).map(
      async (to) => [to, await readAssociations(client, type, to, ids, signal)] as const,
    ),
  );
  for (const id of ids) {
    const links: RecordLinks = { ...NO_LINKS };
    for (const [to, found] of byParent) {
      const kept = keptParent(found.get(id));
      if (to === "companies") links.company = kept;
      else if (to === "contacts") links.contact = kept;
      else if (to === "deals") links.deal = kept;
    }
    out.set(id, links);
  }
  return out;
}

/** A row whose id is unusable still gets a ledger key of its own: a hash of what it was. */
function standInId(type: ObjectType, raw: unknown): string {
  const digest = createHash("sha256")
    .update(JSON.stringify(raw) ?? "undefined")
    .digest("hex");
  return `${type}:no-id:${digest.slice(0, 16)}`;
}

/**
 * A page's rows as the writers take them: each record with its links, as its product row; a record
 * that cannot be one is a row error naming why (it fails alone, with a note).
 */
export async function pageRows(
  client: HubSpotClient,
  type: ObjectType,
  rows: readonly ReadRow[],
  custom: ReadonlySet<string>,
  signal?: AbortSignal,
): Promise<SourceRow<ProductRow>[]> {
  const ids = rows.flatMap((r) => ("record" in r ? [r.record.id] : []));
  const links = await pageLinks(client, type, ids, signal);
  const now = Date.now();
  return rows.map((row) => {
    if (!("record" in row)) {
      const raw = row.raw as { id?: unknown } | null;
      const id = typeof raw?.id === "string" && raw.id !== "" ? raw.id : standInId(type, row.raw);
      return { sourceId: id, data: { rowError: row.error.message } };
    }
    const { record } = row;
    try {
      return {
        sourceId: record.id,
        data: productRow(type, record, links.get(record.id) ?? NO_LINKS, custom, now),
      };
    } catch (err) {
      if (err instanceof RowError) return { sourceId: record.id, data: { rowError: err.message } };
      throw err;
    }
  });
}
