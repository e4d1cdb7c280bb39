import type { RunInfo } from "@drover/provider-sdk";

/**
 * The pg-table source's settings (StartRun `source_config.settings`). The source connection string
 * is the run's secret (`source_config.api_token`), never a setting: it may carry a password.
 */
export interface PgTableConfig {
  /** Source table, schema-qualified. */
  table: QualifiedName;
  /** The key: a ULID column (slots come from its time component) or any unique column with timeColumn. */
  idColumn: string;
  /** When set, slots are ranges of this column and the keyset walk is (timeColumn, idColumn). */
  timeColumn: string | undefined;
  /** [from, to), epoch ms. */
  from: number;
  to: number;
  slotMs: number;
  /** Destination table in the product database. */
  destination: QualifiedName;
  /** Destination column -> source column. */
  mapping: ReadonlyMap<string, string>;
  /** Destination column that receives the run's tenant id and is part of the destination's key. */
  tenantColumn: string | undefined;
  /** Rows read per keyset page, at most; the copy path's own default (copy-sizes.ts) when unset. */
  pageSize: number | undefined;
  /** Rows per write transaction, at most; the copy path's own default (copy-sizes.ts) when unset. */
  windowSize: number | undefined;
  /** Rows per slot compared field by field by verification; the verification's own size when unset. */
  sampleSize: number | undefined;
  /**
   * `auto`: when the source table turns out to be in the product database itself, windows are
   * copied by the server (in-database-copy.ts). `off`: rows always travel through the worker.
   */
  inDatabaseCopy: boolean;
}

export interface QualifiedName {
  schema: string;
  name: string;
}

/**
 * Identifiers cannot be bound as parameters, so every one that reaches SQL matches this pattern
 * (lower-case, unquoted Postgres identifiers) and is double-quoted as well. Values are always parameters.
 */
const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

export function quoteIdent(name: string): string {
  if (!IDENTIFIER.test(name)) throw new Error(`"${name}" is not an identifier this source accepts`);
  return `"${name}"`;
}

export function quoteQualified(q: QualifiedName): string {
  return `${quoteIdent(q.schema)}.${quoteIdent(q.name)}`;
}

const UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

function qualified(setting: string, value: string | undefined): QualifiedName | string {
  if (!value) return `${setting} is required (schema.table)`;
  const parts = value.split(".");
  const [schema, name] = parts.length === 1 ? ["public", parts[0]!] : parts;
  if (parts.length > 2 || !schema || !name || !IDENTIFIER.test(schema) || !IDENTIFIER.test(name))
    return `${setting} must be [schema.]table with lower-case identifiers ([a-z_][a-z0-9_]*)`;
  return { schema, name };
}

function instant(setting: string, value: string | undefined): number | string {
  if (!value) return `${setting} is required (an ISO 8601 instant, e.g. 2024-01-01T00:00:00Z)`;
  const ms = Date.parse(value);
  return Number.isNaN(ms) || ms < 0 ? `${setting} is not an ISO 8601 instant: "${value.slice(0, 40)}"` : ms;
}

function positive(
  setting: string,
  value: string | undefined,
  fallback: number,
  max: number,
): number | string {
  if (value === undefined || value === "") return fallback;
  const n = Number(value);
  return Number.isInteger(n) && n >= 1 && n <= max ? n : `${setting} must be an integer from 1 to ${max}`;
}

/** Most slots one run may seed: a year of hourly slots is 8,760. */
const MAX_SLOTS = 200_000;

/** `destination=source` column pairs; a string is what to fix. */
function parseMapping(text: string | undefined): Map<string, string> | string {
  if (!text) return "mapping is required: destination=source column pairs, e.g. id=id,data=payload";
  const mapping = new Map<string, string>();
  for (const pair of text.split(",")) {
    const [dest, src, extra] = pair.split("=").map((s) => s.trim());
    if (!dest || !src || extra !== undefined || !IDENTIFIER.test(dest) || !IDENTIFIER.test(src))
      return `mapping: "${pair.slice(0, 80)}" is not destination=source with lower-case identifiers`;
    if (mapping.has(dest)) return `mapping names destination column ${dest} twice`;
    mapping.set(dest, src);
  }
  return mapping;
}

/** The slot width in ms (`1h`, `30m`, `1d`), at least a second, and not more than MAX_SLOTS over from..to. */
function parseSlotWidth(text: string | undefined, from: number, to: number): number | string {
  const width = /^(\d+)([smhd])$/.exec(text ?? "1h");
  if (!width) return 'slotWidth must be a number and a unit, e.g. "1h", "30m", "1d"';
  const slotMs = Number(width[1]) * UNITS[width[2]!]!;
  if (slotMs < 1_000) return "slotWidth must be at least 1s";
  if (Math.ceil((to - from) / slotMs) > MAX_SLOTS)
    return `from..to in slots of ${text ?? "1h"} makes more than ${MAX_SLOTS} slots; widen slotWidth`;
  return slotMs;
}

/** Parses and checks the settings; a string is the sentence saying what to fix. */
export function parsePgTableSettings(settings: Readonly<Record<string, string>>): PgTableConfig | string {
  const known = new Set([
    "table",
    "idColumn",
    "timeColumn",
    "from",
    "to",
    "slotWidth",
    "destination",
    "mapping",
    "tenantColumn",
    "pageSize",
    "windowSize",
    "sampleSize",
    "inDatabaseCopy",
  ]);
  const unknown = Object.keys(settings).filter((k) => !known.has(k));
  if (unknown.length > 0) return `unknown setting(s) ${unknown.join(", ")}; known: ${[...known].join(", ")}`;

  const table = qualified("table", settings.table);
  if (typeof table === "string") return table;
  const destination = qualified("destination", settings.destination);
  if (typeof destination === "string") return destination;
  const idColumn = settings.idColumn || "id";
  if (!IDENTIFIER.test(idColumn)) return "idColumn must be a lower-case identifier";
  const timeColumn = settings.timeColumn || undefined;
  if (timeColumn !== undefined && !IDENTIFIER.test(timeColumn))
    return "timeColumn must be a lower-case identifier";
  const tenantColumn = settings.tenantColumn || undefined;
  if (tenantColumn !== undefined && !IDENTIFIER.test(tenantColumn))
    return "tenantColumn must be a lower-case identifier";

  const from = instant("from", settings.from);
  if (typeof from === "string") return from;
  const to = instant("to", settings.to);
  if (typeof to === "string") return to;
  if (to <= from) return "to must be after from";
  const slotMs = parseSlotWidth(settings.slotWidth, from, to);
  if (typeof slotMs === "string") return slotMs;

  const mapping = parseMapping(settings.mapping);
  if (typeof mapping === "string") return mapping;
  if (![...mapping.values()].includes(idColumn))
    return `mapping must copy ${idColumn} (the key): the destination is keyed by it, which makes rewrites idempotent`;
  if (timeColumn && ![...mapping.values()].includes(timeColumn))
    return `mapping must copy ${timeColumn}: verification counts a slot in the destination by it`;
  if (tenantColumn && mapping.has(tenantColumn)) return `tenantColumn ${tenantColumn} must not be mapped too`;

  const pageSize =
    settings.pageSize === undefined ? undefined : positive("pageSize", settings.pageSize, 0, 10_000);
  if (typeof pageSize === "string") return pageSize;
  const windowSize =
    settings.windowSize === undefined ? undefined : positive("windowSize", settings.windowSize, 0, 5_000);
  if (typeof windowSize === "string") return windowSize;
  const sampleSize =
    settings.sampleSize === undefined ? undefined : positive("sampleSize", settings.sampleSize, 0, 100_000);
  if (typeof sampleSize === "string") return sampleSize;
  const inDatabaseCopy = settings.inDatabaseCopy ?? "auto";
  if (inDatabaseCopy !== "auto" && inDatabaseCopy !== "off")
    return 'inDatabaseCopy must be "auto" (copy inside the database when the source is there) or "off"';

  return {
    table,
    idColumn,
    timeColumn,
    from,
    to,
    slotMs,
    destination,
    mapping,
    tenantColumn,
    pageSize,
    windowSize,
    sampleSize,
    inDatabaseCopy: inDatabaseCopy === "auto",
  };
}

/** The run's settings, parsed; a run was admitted with valid ones, so a problem here is permanent. */
export function runConfig(run: RunInfo): PgTableConfig {
  const settings = (run.sourceConfig.settings ?? {}) as Record<string, string>;
  const parsed = parsePgTableSettings(settings);
  if (typeof parsed === "string") throw new Error(`pg-table settings: ${parsed}`);
  return parsed;
}

/** The destination column the source key lands in. */
export function keyDestination(config: PgTableConfig): string {
  for (const [dest, src] of config.mapping) if (src === config.idColumn) return dest;
  throw new Error("unreachable: the mapping copies the key");
}

export function timeDestination(config: PgTableConfig): string | undefined {
  if (!config.timeColumn) return undefined;
  for (const [dest, src] of config.mapping) if (src === config.timeColumn) return dest;
  return undefined;
}

/** A postgres:// URL; the message never repeats the string, which may hold a password. */
export function connectionProblem(connection: string): string | undefined {
  if (!connection.trim())
    return "api_token is required: the source database's connection string (postgres://...)";
  try {
    const url = new URL(connection);
    if (url.protocol !== "postgres:" && url.protocol !== "postgresql:")
      return "api_token must be a postgres:// connection string for the pg-table source";
  } catch {
    return "api_token is not a connection string (postgres://user@host:port/database)";
  }
  return undefined;
}
