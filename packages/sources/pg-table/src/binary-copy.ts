import { createHash } from "node:crypto";
import { finished } from "node:stream/promises";
import { type Database, driverOf, pgErrorCode, type Queryable, type Tx } from "@drover/db/connection";
import { PermanentError, type RowResult, TransientError, type WritableRow } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { type PgTableConfig, quoteIdent, quoteQualified } from "./config.js";
import { COPY_CHUNK_BYTES, givePieceBack, takePiece } from "./copy-pieces.js";
import { type DestinationShape, upsertWindow } from "./destination-table.js";

type Sql = Database["sql"];

/**
 * The streamed path's transport: rows leave the source as `COPY (select …) TO STDOUT (FORMAT
 * binary)` and enter the product database by `COPY … FROM STDIN (FORMAT binary)` in the window's
 * own transaction: straight into the destination when they can (copyWindow), else into a staging
 * table from which one upsert writes the window. No value is turned into text and parsed back on
 * the way (the text path spent most of its time there): the worker only finds where each row starts
 * and ends, and reads its key and time.
 *
 * Every COPY goes through postgres.js, the driver of the window's transaction: the COPY must run on
 * that transaction's connection to commit with the rows and the checkpoint. Its COPY streams had
 * two upstream bugs that could hang a window; both are patched (patches/postgres@3.4.9.patch).
 */

/** COPY's binary format: signature, flags (none), header extension length (0). */
const SIGNATURE = Buffer.from("PGCOPY\n\xff\r\n\0", "latin1");
const HEADER = Buffer.concat([SIGNATURE, Buffer.alloc(8)]);
/** A tuple's field count of -1 ends the stream. */
const TRAILER = Buffer.from([0xff, 0xff]);
const UNIQUE_VIOLATION = "23505";
/** First OID of objects made after initdb: below it, a type is built in and reads the same in every database. */
const FIRST_NORMAL_OBJECT_ID = 16_384;

/** How the source's mapped columns travel, in mapping order. */
export interface SourceColumns {
  /** The COPY's select list after the key and time: a built-in type as it is, any other as text. */
  select: string[];
  /** Each column's type in the staging table, `"schema"."type"`: the source's built-in type, or text. */
  stageTypes: string[];
}

/** The key and time as text, then the mapped columns: every tuple of a page has this many fields. */
export const fieldCount = (columns: SourceColumns | undefined) => 2 + (columns?.select.length ?? 0);

/**
 * Reads the mapped columns' types from the source. A built-in type (pg_catalog, OID below 16384)
 * travels in its binary form, which every server of the same format reads back; any other (a
 * domain, an enum, an extension's type, whose OID differs between databases) travels as text.
 */
export async function sourceColumns(
  source: Sql,
  config: PgTableConfig,
  table: string,
): Promise<SourceColumns> {
  const rows = await source<{ name: string; oid: number; nsp: string; typ: string }[]>`
    select a.attname::text as name, t.oid::int as oid, n.nspname::text as nsp, t.typname::text as typ
      from pg_attribute a join pg_type t on t.oid = a.atttypid join pg_namespace n on n.oid = t.typnamespace
     where a.attrelid = to_regclass(${table}) and a.attnum > 0 and not a.attisdropped`;
  const types = new Map(rows.map((r) => [r.name, r]));
  const select: string[] = [];
  const stageTypes: string[] = [];
  for (const from of config.mapping.values()) {
    const type = types.get(from);
    if (!type) throw new PermanentError(`source table has no column ${from}`);
    const native = type.oid < FIRST_NORMAL_OBJECT_ID && type.nsp === "pg_catalog";
    select.push(native ? quoteIdent(from) : `${quoteIdent(from)}::text`);
    stageTypes.push(native ? `"pg_catalog"."${type.typ}"` : `"pg_catalog"."text"`);
  }
  return { select, stageTypes };
}

/** A binary COPY out of the source, whole: a page is small (pageSize rows), and its windows slice it. */
export async function copyOut(source: Sql, query: string): Promise<Buffer[]> {
  const stream = await source.unsafe(`copy (${query}) to stdout (format binary)`).readable();
  // Every row is a chunk of its own (a CopyData message): taken as it is pushed, not through the
  // stream's buffer and an async iterator's promise per row, and kept as it came (splitTuples).
  const chunks: Buffer[] = [];
  stream.on("data", (chunk: Buffer) => chunks.push(chunk));
  await finished(stream);
  return chunks;
}

/** One row as COPY's binary format carries it, with the key and time (both selected as text) read out. */
export interface CopyTuple {
  bytes: Buffer;
  key: string;
  time: string | null;
  /** Where, in `bytes`, the mapped columns start (after the key and time fields). */
  valuesAt: number;
}

/** Where the tuple tupleAt last returned ends in its `data`: a variable, not an object per row. */
let tupleEnd = 0;

/**
 * The tuple of `fields` fields at `pos` of `data` (where it ends: tupleEnd); "short" when `data`
 * ends before it does, "end" at the stream's trailer. It makes nothing but the tuple, its key and
 * its time: every row of a streamed copy passes here, and the spans, closure and wrapper it used to
 * make per row were a share of the worker's garbage collection (FINDINGS, 2026-12-07, fifteenth
 * session).
 */
function tupleAt(data: Buffer, pos: number, fields: number): CopyTuple | "short" | "end" {
  if (pos + 2 > data.length) return "short";
  const count = data.readInt16BE(pos);
  if (count === -1) return "end";
  if (count !== fields)
    throw new PermanentError(`a COPY tuple has ${count} fields where ${fields} were selected`);
  let at = pos + 2;
  let valuesAt = 0;
  // The key's and the time's [start, end) (-1: null), decoded once the whole tuple is known to be here.
  let keyAt = -1;
  let keyEnd = -1;
  let timeAt = -1;
  let timeEnd = -1;
  for (let f = 0; f < count; f++) {
    if (f === 2) valuesAt = at - pos;
    if (at + 4 > data.length) return "short";
    const length = data.readInt32BE(at);
    at += 4;
    if (length < 0) continue;
    if (at + length > data.length) return "short";
    if (f === 0) {
      keyAt = at;
      keyEnd = at + length;
    } else if (f === 1) {
      timeAt = at;
      timeEnd = at + length;
    }
    at += length;
  }
  if (keyAt < 0) throw new PermanentError("a source row has no key (null in the key column)");
  tupleEnd = at;
  return {
    // The server sends a row per CopyData message: the tuple is then the whole chunk, kept as it is
    // rather than as a view of itself (a Buffer per row).
    bytes: pos === 0 && at === data.length ? data : data.subarray(pos, at),
    key: data.toString("utf8", keyAt, keyEnd),
    time: timeAt < 0 ? null : data.toString("utf8", timeAt, timeEnd),
    valuesAt: valuesAt || at - pos,
  };
}

/**
 * Cuts a binary COPY stream, as the chunks it arrived in, into its tuples without decoding the
 * values or copying them: a tuple inside one chunk is a view of it (the server sends a row per
 * CopyData message, so in practice every tuple is), one that spans chunks is copied out of them.
 * (A page copied into one buffer first cost the worker a second copy of every page: ~40 MB more at
 * four lanes.) A stream that ends mid-row or lacks its trailer was cut on the way (the read is
 * retried); a tuple of another width is a bug.
 */
export function splitTuples(stream: Buffer | readonly Buffer[], fields: number): CopyTuple[] {
  const chunks = Buffer.isBuffer(stream) ? [stream] : stream;
  const tuples: CopyTuple[] = [];
  let carry: Buffer | undefined;
  let started = false;
  let ended = false;
  for (const chunk of chunks) {
    if (ended) {
      if (chunk.length > 0) throw new TransientError("the source's COPY stream goes on after its trailer");
      continue;
    }
    const data: Buffer = carry ? Buffer.concat([carry, chunk]) : chunk;
    carry = undefined;
    let pos = 0;
    if (!started) {
      if (data.length < HEADER.length) {
        carry = data;
        continue;
      }
      if (!data.subarray(0, SIGNATURE.length).equals(SIGNATURE))
        throw new TransientError("the source's COPY stream does not start with the binary signature");
      const extension = data.readInt32BE(SIGNATURE.length + 4);
      if (data.length < HEADER.length + extension) {
        carry = data;
        continue;
      }
      pos = HEADER.length + extension;
      started = true;
    }
    for (;;) {
      const next = tupleAt(data, pos, fields);
      if (next === "short") {
        if (pos < data.length) carry = data.subarray(pos);
        break;
      }
      if (next === "end") {
        ended = true;
        if (pos + 2 < data.length)
          throw new TransientError("the source's COPY stream goes on after its trailer");
        break;
      }
      tuples.push(next);
      pos = tupleEnd;
    }
  }
  if (!started) throw new TransientError("the source's COPY stream does not start with the binary signature");
  if (!ended) throw new TransientError("the source's COPY stream ended mid-row");
  return tuples;
}

/** The staging table of a column layout: per connection (temporary), emptied at every commit. */
function stageOf(columns: SourceColumns): { name: string; create: string } {
  const layout = ["text", "text", ...columns.stageTypes];
  const name = `drover_stage_${createHash("sha256").update(layout.join(",")).digest("hex").slice(0, 16)}`;
  const defs = layout.map((t, i) => `${i === 0 ? "k" : i === 1 ? "t" : `c${i - 2}`} ${t}`).join(", ");
  return { name, create: `create temp table if not exists ${name} (${defs}) on commit delete rows` };
}

/**
 * Copies tuples into the staging table, on the transaction's (or savepoint's) own connection. The
 * table is made if this connection does not have it yet; made in a transaction that rolls back, it
 * goes with it, so every transaction asks.
 */
async function stage(q: Queryable, columns: SourceColumns, tuples: readonly CopyTuple[]): Promise<string> {
  const { name, create } = stageOf(columns);
  await driverOf(q).unsafe(create);
  await copyIn(q, `pg_temp.${name}`, copyChunks(tuples, STAGED));
  return name;
}

/**
 * Per destination column (shape order): the staged value as it is when its type is the
 * destination's, else through text and a cast to the destination's type, as the in-database copy
 * does, so both paths accept and refuse the same values.
 */
function stagedSelect(columns: SourceColumns, shape: DestinationShape) {
  return shape.columns.map((c, i) =>
    sql.raw(columns.stageTypes[i] === c.type ? `s.c${i}` : `s.c${i}::text::${c.type}`),
  );
}

export interface StreamedRecord {
  id: string;
  tuple?: CopyTuple | undefined;
}

function tupleOf(row: WritableRow<StreamedRecord>): CopyTuple {
  if (!row.data.tuple) throw new PermanentError(`row ${row.sourceId} was read without its values`);
  return row.data.tuple;
}

/** Types whose binary form is the text's own bytes: the tenant id can be written as it is. */
const TEXT_TYPES = new Set(['"pg_catalog"."text"', '"pg_catalog"."varchar"', '"pg_catalog"."bpchar"']);

/**
 * Whether a window can go straight into the destination: every column staged in the destination's
 * own type, so the tuples COPY FROM reads are already the destination's rows, and a tenant column
 * (if any) of a text type.
 */
function direct(columns: SourceColumns, shape: DestinationShape): boolean {
  if (shape.tenantType !== undefined && !TEXT_TYPES.has(shape.tenantType)) return false;
  return shape.columns.every((c, i) => columns.stageTypes[i] === c.type);
}

export { COPY_CHUNK_BYTES };

/**
 * How a COPY FROM takes a tuple: its field count, then `lead` (if any), then `bytes(t)` from
 * `from(t)`. Read field by field rather than as an object per tuple: every row of a window passes
 * here twice (sized, then copied).
 */
export interface OutShape<T> {
  count(t: T): number;
  bytes(t: T): Buffer;
  from(t: T): number;
}

/**
 * A binary COPY stream of `tuples` in pieces of about COPY_CHUNK_BYTES, each filled in place, made
 * as the COPY takes them. A window's rows are thus never in memory twice: one buffer of the whole
 * window, which the driver then copied again into its message, held each row three times at once
 * (the page, the buffer, the message), and windows could be only half as large in the same bytes.
 * The pieces come from copy-pieces.ts, which takes them back once sent (copyIn).
 */
export function* copyChunks<T>(tuples: readonly T[], out: OutShape<T>, lead?: Buffer): Generator<Buffer> {
  const extra = lead?.length ?? 0;
  const sizeOf = (t: T) => 2 + extra + out.bytes(t).length - out.from(t);
  // What is left to send: a piece is never larger than that (a row rewritten alone takes a few
  // hundred bytes, not a whole piece).
  let left = HEADER.length + TRAILER.length;
  for (const t of tuples) left += sizeOf(t);
  let chunk = takePiece(Math.min(COPY_CHUNK_BYTES, left));
  let at = HEADER.copy(chunk, 0);
  for (const t of tuples) {
    const size = sizeOf(t);
    if (at + size > chunk.length) {
      if (at > 0) yield chunk.subarray(0, at);
      chunk = takePiece(Math.max(Math.min(COPY_CHUNK_BYTES, left), size));
      at = 0;
    }
    at = chunk.writeInt16BE(out.count(t), at);
    if (lead) at += lead.copy(chunk, at);
    at += out.bytes(t).copy(chunk, at, out.from(t));
    left -= size;
  }
  if (at + TRAILER.length > chunk.length) {
    yield chunk.subarray(0, at);
    chunk = Buffer.allocUnsafe(TRAILER.length);
    at = 0;
  }
  at += TRAILER.copy(chunk, at);
  yield chunk.subarray(0, at);
}

/** A staged tuple: as it was read, key and time included. */
const STAGED: OutShape<CopyTuple> = {
  count: (t) => t.bytes.readInt16BE(0),
  bytes: (t) => t.bytes,
  from: () => 2,
};

/**
 * The window's tuples as the destination's rows: the run's tenant (when the destination has a
 * tenant column) then the mapped columns, as read; the key and time fields of the walk left out.
 */
function destinationChunks(config: PgTableConfig, tenantId: string, tuples: readonly CopyTuple[]) {
  let lead: Buffer | undefined;
  if (config.tenantColumn) {
    const tenant = Buffer.from(tenantId, "utf8");
    lead = Buffer.allocUnsafe(4 + tenant.length);
    lead.writeInt32BE(tenant.length, 0);
    tenant.copy(lead, 4);
  }
  const added = lead ? 1 : 0;
  const shape: OutShape<CopyTuple> = {
    count: (t) => t.bytes.readInt16BE(0) - 2 + added,
    bytes: (t) => t.bytes,
    from: (t) => t.valuesAt,
  };
  return copyChunks(tuples, shape, lead);
}

/** Writes a COPY FROM's data as it is made, a piece at a time, waiting while the socket is full. */
async function copyIn(q: Queryable, target: string, data: Iterable<Buffer>): Promise<void> {
  const stream = await driverOf(q).unsafe(`copy ${target} from stdin (format binary)`).writable();
  // A COPY the server refuses destroys the stream (with its error, which `finished` then throws):
  // the wait ends on that as on a drain.
  const room = () =>
    new Promise<void>((resolve) => {
      const done = () => {
        stream.off("drain", done);
        stream.off("close", done);
        resolve();
      };
      stream.on("drain", done);
      stream.on("close", done);
    });
  // A piece goes back to copy-pieces.ts once the socket has written it (the callback), not sooner:
  // until then the socket may still read from it. One that fails is left to the collector.
  const sent = (piece: Buffer) => (err?: Error | null) => {
    if (!err) givePieceBack(piece);
  };
  for (const piece of data) {
    if (stream.destroyed) break;
    if (!stream.write(piece, sent(piece))) await room();
  }
  if (!stream.destroyed) stream.end();
  await finished(stream);
}

/** A window's results, one per row: the same two objects for every row (nothing changes a result). */
const NEW_ROW: RowResult = Object.freeze({ action: "upserted", replaced: false });
const REPLACED_ROW: RowResult = Object.freeze({ action: "upserted", replaced: true });

function resultsByKey(
  rows: readonly WritableRow<StreamedRecord>[],
  inserted: ReadonlyMap<string, boolean>,
): RowResult[] {
  return rows.map((r) => {
    const was = inserted.get(r.data.id);
    if (was === undefined) throw new PermanentError(`the upsert returned no row for key ${r.sourceId}`);
    return was ? NEW_ROW : REPLACED_ROW;
  });
}

/**
 * A window. When every column arrives in the destination's type, its tuples are first COPYed
 * straight into the destination, inside a savepoint: a window none of whose keys is there yet (a
 * first copy, the common case) is then written at COPY's own cost, every row new. A key already
 * there (a retry, a re-run) fails that COPY with a unique violation; the savepoint takes it back
 * and the window goes the general way: its tuples COPYed into the staging table, then one upsert
 * from it, which overwrites what is there and says which rows were new. Any other failure is the
 * window's, as for the upsert: it is written again row by row.
 */
export async function copyWindow(
  q: Tx,
  config: PgTableConfig,
  shape: DestinationShape,
  columns: SourceColumns,
  tenantId: string,
  rows: readonly WritableRow<StreamedRecord>[],
): Promise<RowResult[]> {
  const tuples = rows.map(tupleOf);
  if (direct(columns, shape)) {
    const target = [
      ...(config.tenantColumn ? [config.tenantColumn] : []),
      ...shape.columns.map((c) => c.name),
    ];
    const into = `${quoteQualified(config.destination)} (${target.map(quoteIdent).join(", ")})`;
    try {
      await q.transaction((sp) => copyIn(sp, into, destinationChunks(config, tenantId, tuples)));
      return rows.map(() => NEW_ROW);
    } catch (err) {
      if (pgErrorCode(err) !== UNIQUE_VIOLATION) throw err;
    }
  }
  const name = await stage(q, columns, tuples);
  const from = sql.raw(`pg_temp.${name} s`);
  return resultsByKey(
    rows,
    await upsertWindow(q, config, shape, tenantId, stagedSelect(columns, shape), from),
  );
}

/**
 * One row of a window that failed, in its own savepoint: its tuple alone staged and upserted, so a
 * row the server refuses (a malformed value, a failed cast, a constraint) loses only itself. The
 * rows staged before it in the same transaction stay staged; the upsert picks this one by key.
 */
export async function copyRow(
  q: Queryable,
  config: PgTableConfig,
  shape: DestinationShape,
  columns: SourceColumns,
  tenantId: string,
  row: WritableRow<StreamedRecord>,
): Promise<RowResult> {
  const name = await stage(q, columns, [tupleOf(row)]);
  const from = sql`${sql.raw(`pg_temp.${name}`)} s where s.k = ${row.data.id}`;
  const [result] = resultsByKey(
    [row],
    await upsertWindow(q, config, shape, tenantId, stagedSelect(columns, shape), from),
  );
  return result!;
}
