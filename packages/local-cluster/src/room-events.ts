import { randomBytes } from "node:crypto";
import postgres from "postgres";

/**
 * A source for the pg-table demo, tests and bench: a chat product's room_events (ULID id, room id,
 * JSON data), generated inside Postgres so a million rows take seconds rather than a gigabyte over the wire.
 */

export interface RoomEventsOptions {
  rows: number;
  /** ULID times are spread uniformly over [from, to). */
  from: Date;
  to: Date;
  /**
   * How the rows lie in the table. `arrival` (the default): in time order, as an event log that is
   * appended as events happen is stored (each row's time drawn within its own share of the span,
   * so keys still collide and interleave within a millisecond). `random`: times drawn over the whole
   * span for every row, so neighbouring keys lie on unrelated heap pages: the worst case of a walk
   * in key order, kept for measuring it (BENCH_TABLE_ORDER=random).
   */
  order?: "arrival" | "random";
  /** Schema of the table (created if missing); `public` by default. */
  schema?: string;
  /** Rooms the events are spread over. */
  rooms?: number;
  /** Varies the ids and payloads between two sources of the same size. */
  seed?: string;
  onProgress?(done: number, total: number): void;
}

/** Rows per INSERT … SELECT: small enough to report progress, large enough to keep the server busy. */
const CHUNK = 50_000;

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * Creates `<schema>.room_events` and fills it. Ids are real ULIDs: ten Crockford base32 characters
 * of millisecond time, then sixteen of randomness (here: the upper-cased hex of an md5, which are
 * valid Crockford symbols). Payloads are JSON objects of about 0.5 to 2 KB, like a chat event.
 */
export async function generateRoomEvents(sql: postgres.Sql, options: RoomEventsOptions): Promise<void> {
  const schema = options.schema ?? "public";
  if (!IDENTIFIER.test(schema)) throw new Error(`"${schema}" is not a plain identifier`);
  const table = `"${schema}"."room_events"`;
  await sql.unsafe(`create schema if not exists "${schema}"`);
  await sql.unsafe(`create table if not exists ${table} (
      id text primary key,
      room_id uuid not null,
      data jsonb not null)`);
  const from = options.from.getTime();
  const span = Math.max(1, options.to.getTime() - from);
  const rooms = options.rooms ?? 500;
  const seed = options.seed ?? randomBytes(4).toString("hex");
  const arrival = (options.order ?? "arrival") === "arrival";
  // $5 + the row's offset in the span: its share of the span (arrival), or anywhere in it (random).
  const offset = arrival
    ? `floor((g0.i + random()) * $6::float8 / ${Math.max(1, options.rows)})::bigint`
    : "floor(random() * $6::bigint)::bigint";
  for (let start = 0; start < options.rows; start += CHUNK) {
    const end = Math.min(start + CHUNK, options.rows);
    await sql.unsafe(
      `insert into ${table} (id, room_id, data)
       select (select string_agg(substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((g.ms >> (5 * (9 - k))) & 31)::int + 1, 1), '' order by k)
                 from generate_series(0, 9) k)
              || upper(substr(md5($3 || g.i::text), 1, 16)),
              md5($3 || 'room' || (g.i % $4)::text)::uuid,
              jsonb_build_object(
                'type', (array['message', 'reaction', 'join', 'leave', 'edit'])[1 + g.i % 5],
                'sender', jsonb_build_object('id', g.i % 9973, 'name', 'user ' || (g.i % 9973), 'role', (array['agent', 'customer', 'bot'])[1 + g.i % 3]),
                'text', repeat(md5(g.i::text || 'text') || ' ', (12 + (g.i::bigint * 7919) % 45)::int),
                'attachments', case when g.i % 4 = 0 then jsonb_build_array(jsonb_build_object('kind', 'image', 'url', 'https://files.example/' || md5(g.i::text) || '.png', 'bytes', g.i % 100000)) else '[]'::jsonb end,
                'meta', jsonb_build_object('client', (array['web', 'ios', 'android'])[1 + g.i % 3], 'seq', g.i, 'edited', g.i % 11 = 0))
         from (select g0.i, $5::bigint + ${offset} as ms
                 from generate_series($1::int, $2::int - 1) g0(i)) g
       on conflict (id) do nothing`,
      [start, end, seed, rooms, from, span],
    );
    options.onProgress?.(end, options.rows);
  }
  await sql.unsafe(`analyze ${table}`);
}

export interface SourceDatabase {
  url: string;
  name: string;
  sql: postgres.Sql;
  drop(): Promise<void>;
}

/** A second database on the same server, for a source that is "another database". */
export async function createSourceDatabase(
  baseUrl: string,
  prefix = "drover_source",
): Promise<SourceDatabase> {
  const name = `${prefix}_${randomBytes(5).toString("hex")}`;
  const admin = postgres(baseUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database "${name}"`);
  } finally {
    await admin.end({ timeout: 5 });
  }
  const u = new URL(baseUrl);
  u.pathname = `/${name}`;
  const url = u.toString();
  const sql = postgres(url, { max: 4, onnotice: () => {} });
  return {
    url,
    name,
    sql,
    async drop() {
      await sql.end({ timeout: 5 });
      const a = postgres(baseUrl, { max: 1, onnotice: () => {} });
      try {
        await a.unsafe(`drop database if exists "${name}" with (force)`);
      } finally {
        await a.end({ timeout: 5 });
      }
    },
  };
}
