import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { migrateDatabase } from "../src/index.js";
import { DEFAULT_DATABASE_URL } from "../src/testing.js";

const base = process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL;
const name = `drover_migrate_${randomBytes(5).toString("hex")}`;
const url = (() => {
  const u = new URL(base);
  u.pathname = `/${name}`;
  return u.toString();
})();

describe("migrations", () => {
  afterAll(async () => {
    const admin = postgres(base, { max: 1, onnotice: () => {} });
    await admin.unsafe(`drop database if exists "${name}" with (force)`);
    await admin.end();
  });

  it("apply once when many replicas boot at the same moment", async () => {
    const admin = postgres(base, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database "${name}"`);
    await admin.end();

    const results = await Promise.allSettled(Array.from({ length: 8 }, () => migrateDatabase(url)));
    expect(results.filter((r) => r.status === "rejected")).toEqual([]);

    const sql = postgres(url, { max: 1, onnotice: () => {} });
    const applied = await sql`select count(*)::int as n from drizzle.__drizzle_migrations`;
    const tables =
      await sql`select count(*)::int as n from information_schema.tables where table_schema in ('drover','app')`;
    await sql.end();
    expect(applied[0]!.n).toBeGreaterThanOrEqual(1);
    expect(tables[0]!.n).toBe(15);
  });
});
