import { pipeline } from "node:stream/promises";
import { openDatabase } from "@drover/db";
const postgres = (u: string, _o: unknown) => openDatabase(u, { max: 4 }).sql;
import { walkWindows } from "./window-walk.js";
const src = postgres("postgres://postgres@127.0.0.1:5432/exp_src", { max: 4, onnotice: () => {} });
const admin = postgres("postgres://postgres@127.0.0.1:5432/postgres", { max: 1, onnotice: () => {} });
await admin.unsafe("drop database if exists exp_dst with (force)"); await admin.unsafe("create database exp_dst"); 
const dst = postgres("postgres://postgres@127.0.0.1:5432/exp_dst", { max: 4, onnotice: () => {} });
await dst.unsafe(`create table ev (tenant_id text not null default 'walk', id text not null, room_id uuid not null, data jsonb not null, copied_at timestamptz not null default now(), primary key (tenant_id, id))`);
await dst.unsafe(`create index ev_tenant_room on ev (tenant_id, room_id)`);
await dst.unsafe(`create table ck (n bigint not null, at timestamptz)`); await dst.unsafe(`insert into ck values (0, now())`);
const from = Date.parse("2026-01-01T00:00:00Z"), to = Date.parse("2026-01-03T00:00:00Z");
const shapes = (process.env.SHAPES ?? "2:1000:500,2:4000:2000,2:10000:5000,pipe").split(",");
for (let r = 0; r < Number(process.env.R ?? 2); r++) for (const sh of shapes) {
  await dst.unsafe("truncate ev"); await dst.unsafe("checkpoint");
  const t0 = performance.now();
  if (sh === "pipe") {
    await pipeline(await src.unsafe("copy (select id, room_id, data from room_events) to stdout (format binary)").readable(), await dst.unsafe("copy ev (id, room_id, data) from stdin (format binary)").writable());
  } else {
    const [lanes, page, window] = sh.split(":").map(Number);
    await walkWindows(src, dst, { table: "public.room_events", target: "ev", checkpoint: "ck", from, to, slotMs: 3_600_000, lanes: lanes!, page: page!, window: window! });
  }
  const [{ n }] = await dst`select count(*)::int as n from ev`;
  console.log(r, sh.padEnd(14), ((performance.now() - t0) / 1000).toFixed(1), "s", n);
}
process.exit(0);
