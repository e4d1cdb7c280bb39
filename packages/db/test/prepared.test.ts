import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Database, executePrepared, openDatabase } from "../src/index.js";
import { createTestDatabase, type TestDatabase } from "../src/testing.js";

let testDb: TestDatabase;
let database: Database;
beforeAll(async () => {
  testDb = await createTestDatabase();
  database = openDatabase(testDb.url, { max: 1 });
});
afterAll(async () => {
  await database?.close();
  await testDb?.drop();
});

describe("executePrepared", () => {
  it("prepares a statement once per connection and binds it again with each run's values", async () => {
    const square = (n: number) =>
      executePrepared<{ n: number; label: string }>(
        database.db,
        sql`select (${n}::int * ${n}::int) as n, ${`x${n}`}::text as label`,
      );
    expect(await square(3)).toEqual([{ n: 9, label: "x3" }]);
    expect(await square(7)).toEqual([{ n: 49, label: "x7" }]);
    // One connection: the server holds the statement once, not once per run.
    const prepared = await database.sql<{ n: number }[]>`
      select count(*)::int as n from pg_prepared_statements where statement like 'select ($1::int%'`;
    expect(prepared[0]!.n).toBe(1);
  });

  it("runs inside a transaction on the transaction's own connection, and rolls back with it", async () => {
    await database.sql`create table if not exists prepared_probe (k text primary key)`;
    await expect(
      database.db.transaction(async (tx) => {
        await executePrepared(tx, sql`insert into prepared_probe (k) values (${"kept?"})`);
        const seen = await executePrepared<{ n: number }>(
          tx,
          sql`select count(*)::int as n from prepared_probe`,
        );
        expect(seen).toEqual([{ n: 1 }]);
        throw new Error("roll back");
      }),
    ).rejects.toThrow("roll back");
    expect(await executePrepared(database.db, sql`select k from prepared_probe`)).toEqual([]);
  });
});
