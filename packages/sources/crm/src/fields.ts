import { createHash } from "node:crypto";
import { RowError } from "@drover/provider-sdk";

/**
 * Field readers for untrusted source rows. Each throws RowError naming the field, so a malformed
 * row becomes a note that says what was wrong with it, and loses only itself.
 */

type Obj = Record<string, unknown>;

export function asObject(v: unknown, what = "row"): Obj {
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new RowError(`${what} is not an object`);
  return v as Obj;
}

const MAX_TEXT = 1_000_000;

export function text(row: Obj, field: string, opts: { required: true }): string;
export function text(row: Obj, field: string, opts?: { required?: boolean }): string | null;
export function text(row: Obj, field: string, opts: { required?: boolean } = {}): string | null {
  const v = row[field];
  if (v === undefined || v === null || v === "") {
    if (opts.required) throw new RowError(`${field} is missing`);
    return null;
  }
  if (typeof v !== "string") throw new RowError(`${field} is not text (got ${typeof v})`);
  if (v.length > MAX_TEXT) throw new RowError(`${field} is longer than ${MAX_TEXT} characters`);
  return v;
}

export function number(row: Obj, field: string): number | null {
  const v = row[field];
  if (v === undefined || v === null || v === "") return null;
  const n = typeof v === "number" ? v : typeof v === "string" ? Number(v) : Number.NaN;
  if (!Number.isFinite(n)) throw new RowError(`${field} is not a number`);
  return n;
}

export function bool(row: Obj, field: string): boolean {
  const v = row[field];
  if (v === undefined || v === null) return false;
  if (typeof v === "boolean") return v;
  if (v === 0 || v === 1) return v === 1;
  throw new RowError(`${field} is not a boolean`);
}

const DATE = /^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

/** Pipedrive writes "YYYY-MM-DD HH:MM:SS" in UTC without a zone. */
export function timestamp(row: Obj, field: string): Date | null {
  const v = text(row, field);
  if (v === null) return null;
  if (!DATE.test(v)) throw new RowError(`${field} is not a date ("${v.slice(0, 40)}")`);
  const iso = v.includes("T") || /[Z+]/.test(v.slice(10)) ? v : `${v.replace(" ", "T")}Z`;
  const d = new Date(iso.length === 10 ? `${iso}T00:00:00Z` : iso);
  if (Number.isNaN(d.getTime())) throw new RowError(`${field} is not a date ("${v.slice(0, 40)}")`);
  return d;
}

export function day(row: Obj, field: string): string | null {
  const d = timestamp(row, field);
  return d ? d.toISOString().slice(0, 10) : null;
}

/**
 * A reference to another record. Pipedrive sends it as a plain integer in some endpoints and as an
 * expanded object carrying `value` in v1 lists; leads use UUID strings. Never assume one form.
 */
export function ref(row: Obj, field: string): string | null {
  let v = row[field];
  if (typeof v === "object" && v !== null && !Array.isArray(v)) v = (v as Obj).value;
  if (v === undefined || v === null || v === "" || v === 0) return null;
  if (typeof v === "number" && Number.isSafeInteger(v) && v > 0) return String(v);
  if (typeof v === "string" && (/^[1-9]\d{0,18}$/.test(v) || UUID.test(v))) return v;
  throw new RowError(`${field} is not a record id`);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The row's own id, as the ledger keys it. */
export function sourceId(row: unknown): string | null {
  if (typeof row !== "object" || row === null) return null;
  const v = (row as Obj).id;
  if (typeof v === "number" && Number.isSafeInteger(v)) return String(v);
  if (typeof v === "string" && v.length > 0 && v.length <= 64) return v;
  return null;
}

/**
 * The name of a listed row that has no usable id, the same for the import (which notes the row as
 * failed under it) and for verification (which lists the source's ids to compare with the ledger
 * and those notes). It names the list and a digest of the row itself, never where a walk met it:
 * the import's page size, its partitions and its catch-up pass each meet a row at another position
 * than verification's own walk does. A row met twice gets one name; so do two identical rows.
 */
export function standInId(kind: string, list: number, raw: unknown): string {
  const digest = createHash("sha256").update(canonicalJson(raw)).digest("hex").slice(0, 16);
  return `${kind}@${list}:${digest}`;
}

/** JSON with object keys sorted, so equal rows digest alike whatever order their keys came in. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (typeof value === "object" && value !== null) {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Obj)[k])}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** The primary (or first non-empty) value of a v1 `[{value, primary}]` list; "" means none. */
export function primaryValue(row: Obj, field: string, kind: "email" | "phone"): string | null {
  const v = row[field];
  if (v === undefined || v === null) return null;
  if (typeof v === "string") return checkContact(v, field, kind);
  if (!Array.isArray(v)) throw new RowError(`${field} is not a list`);
  const entries = v.filter((e): e is Obj => typeof e === "object" && e !== null);
  const pick =
    entries.find((e) => e.primary === true && typeof e.value === "string" && e.value !== "") ??
    entries.find((e) => typeof e.value === "string" && e.value !== "");
  return pick ? checkContact(pick.value as string, field, kind) : null;
}

function checkContact(value: string, field: string, kind: "email" | "phone"): string | null {
  const v = value.trim();
  if (v === "") return null;
  if (kind === "email" && !EMAIL.test(v))
    throw new RowError(`${field} "${v.slice(0, 60)}" is not an email address`);
  if (v.length > 320) throw new RowError(`${field} is too long`);
  return v;
}

/**
 * A key that belongs to a custom field: the field's 40-hex key, or one of its companions
 * `<key>_<suffix>`. v1 spreads a monetary, range, time or address field over several root keys
 * (`<key>_currency`, `<key>_until`, `<key>_timezone_id`, `<key>_formatted_address`, `<key>_route`,
 * ...); keeping the 40-hex key alone loses the currency, the end of the range or the address parts.
 */
export const CUSTOM_FIELD_KEY = /^[0-9a-f]{40}(_[a-z0-9_]+)?$/;

/**
 * Custom fields, every key that belongs to one: v2 sends a `custom_fields` object (a monetary field
 * as `{value, currency}`, an address as an object); v1 puts them at the root, companions included.
 * A key without a value is left out on both (v1 leads omit it, other kinds send null): the same
 * record reads the same whichever version served it.
 */
export function customFields(row: Obj): Record<string, unknown> | null {
  const out: Record<string, unknown> = {};
  const nested = row.custom_fields;
  if (typeof nested === "object" && nested !== null && !Array.isArray(nested))
    for (const [k, v] of Object.entries(nested)) if (v !== null && v !== undefined) out[k] = v;
  for (const [k, v] of Object.entries(row)) if (CUSTOM_FIELD_KEY.test(k) && v !== null) out[k] = v;
  return Object.keys(out).length > 0 ? out : null;
}
