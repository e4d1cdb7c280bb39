import { RowError } from "@drover/provider-sdk";

/**
 * A HubSpot record as every read answers it (`SimplePublicObject`): its id (a numeric string), its
 * properties (each a string or null: HubSpot sends every value as text), and its own dates.
 * `archived` is what the source's lists flag as deleted: read only with `archived=true`.
 */
export interface HubSpotRecord {
  id: string;
  properties: Record<string, string | null>;
  createdAt: string;
  updatedAt: string;
  archived: boolean;
  archivedAt?: string;
}

type Obj = Record<string, unknown>;

const ID = /^[1-9]\d{0,19}$/;

/**
 * One record of an answer, checked: an answer is untrusted, and a record without a usable id or
 * properties fails alone (RowError) rather than the page.
 */
export function parseRecord(raw: unknown): HubSpotRecord {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw))
    throw new RowError("record is not an object");
  const row = raw as Obj;
  const id = typeof row.id === "number" ? String(row.id) : row.id;
  if (typeof id !== "string" || !ID.test(id)) throw new RowError("record has no usable id");
  const props = row.properties;
  if (typeof props !== "object" || props === null || Array.isArray(props))
    throw new RowError(`record ${id}: properties is not an object`);
  const properties: Record<string, string | null> = {};
  for (const [name, value] of Object.entries(props as Obj)) {
    if (value === null || value === undefined) properties[name] = null;
    else if (typeof value === "string") properties[name] = value;
    else if (typeof value === "number" || typeof value === "boolean") properties[name] = String(value);
    else throw new RowError(`record ${id}: property ${name} is not a value`);
  }
  return {
    id,
    properties,
    createdAt: typeof row.createdAt === "string" ? row.createdAt : "",
    updatedAt: typeof row.updatedAt === "string" ? row.updatedAt : "",
    archived: row.archived === true,
    ...(typeof row.archivedAt === "string" ? { archivedAt: row.archivedAt } : {}),
  };
}

/** A read's rows: each parsed record, or the row error that a malformed one is, with its raw form. */
export type ReadRow = { record: HubSpotRecord } | { error: RowError; raw: unknown };

export function parseRows(raws: readonly unknown[]): ReadRow[] {
  return raws.map((raw) => {
    try {
      return { record: parseRecord(raw) };
    } catch (err) {
      if (err instanceof RowError) return { error: err, raw };
      throw err;
    }
  });
}

/**
 * The same record read in several requests, one per batch of properties: the properties of each
 * answer together. The first answer's dates and state stand (the later batches read the same page).
 */
export function mergeProperties(into: HubSpotRecord, from: HubSpotRecord): void {
  for (const [name, value] of Object.entries(from.properties)) {
    if (value !== null || !(name in into.properties)) into.properties[name] = value;
  }
}

/**
 * A record's custom properties as the product keeps custom fields (`custom_fields`, as Pipedrive's):
 * each custom property that has a value, under its internal name; one without a value is left out.
 */
export function customFieldsOf(record: HubSpotRecord, custom: ReadonlySet<string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(record.properties))
    if (custom.has(name) && value !== null && value !== "") out[name] = value;
  return out;
}
