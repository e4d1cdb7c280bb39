import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isConnectionError, openDatabase, pgErrorCode } from "../src/index.js";
import { createTestDatabase, DEFAULT_DATABASE_URL, type TestDatabase } from "../src/testing.js";

/**
 * Connections terminated under load (pg_terminate_backend, a failover, a proxy restart) must fail
 * the queries and transactions on them with an error the task runner classifies as transient, and
 * leave the pool usable. With postgres.js 3.4.9 as published, a transaction whose backend died
 * crashed the whole process from a setImmediate callback (porsager/postgres#1208): the chaos suite
 * lost every worker at once. patches/postgres@3.4.9.patch fixes the driver; this keeps it fixed.
 */
let testDb: TestDatabase;
beforeAll(async () => {
  testDb = await createTestDatabase();
});
afterAll(async () => {
  await testDb?.drop();
});

const withTimeout = <T>(p: Promise<T>, ms: number, what: string) =>
  Promise.race([
    p,
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what} hung for ${ms} ms`)), ms)),
  ]);

describe("terminated connections", () => {
  it("fail their transactions with a connection error and leave the pool usable; the process survives", async () => {
    const applicationName = `drover-terminate-${randomBytes(4).toString("hex")}`;
    const database = openDatabase(testDb.url, { max: 6, applicationName });
    const killer = postgres(process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL, { max: 1, onnotice: () => {} });
    const outcomes = new Map<string, number>();
    const count = (k: string) => outcomes.set(k, (outcomes.get(k) ?? 0) + 1);
    let stop = false;
    try {
      // Six lanes of short transactions with a savepoint per "row", as the window writer runs them.
      const lane = async () => {
        while (!stop) {
          try {
            await withTimeout(
              database.db.transaction(async (tx) => {
                await tx.execute(sql`create temp table if not exists w (n int) on commit drop`);
                for (let i = 0; i < 5; i++) {
                  await tx.transaction((sp) => sp.execute(sql`insert into w values (${i})`));
                }
                await tx.execute(sql`select pg_sleep(0.01)`);
              }),
              10_000,
              "a transaction",
            );
            count("committed");
          } catch (err) {
            if ((err as Error).message.includes("hung")) throw err;
            const code = pgErrorCode(err) ?? (err as { code?: string }).code ?? "";
            count(
              isConnectionError(err) || code === "57P01" || code === "25P02" ? "connection" : `other ${code}`,
            );
          }
        }
      };
      const lanes = Array.from({ length: 6 }, lane);
      // Terminate the pool's backends every 150 ms for about half a second. (Not much longer: after
      // each failed connection postgres.js waits longer before the next, up to 20 s.)
      for (let round = 0; round < 4; round++) {
        await new Promise((r) => setTimeout(r, 150));
        await killer`select pg_terminate_backend(pid) from pg_stat_activity
                      where application_name = ${applicationName} and pid <> pg_backend_pid()`;
      }
      stop = true;
      await Promise.all(lanes);
      expect([...outcomes.keys()].filter((k) => k.startsWith("other"))).toEqual([]);
      expect(outcomes.get("connection") ?? 0).toBeGreaterThan(0);
      expect(outcomes.get("committed") ?? 0).toBeGreaterThan(0);
      // Every connection of the pool answers again. A connection killed in the last round may still
      // sit idle in the pool and only find out on its next write: that query fails as a connection
      // error (retried by the task runner as transient), and the retry gets a fresh connection.
      const died = (err: unknown) =>
        isConnectionError(err) || ["57P01", "25P02", "08006"].includes(pgErrorCode(err) ?? "");
      const answer = async (tries = 3): Promise<{ one: number }[]> => {
        try {
          return await database.db.execute<{ one: number }>(sql`select 1 as one`);
        } catch (err) {
          if (tries <= 1 || !died(err)) throw err;
          return answer(tries - 1);
        }
      };
      const answers = await withTimeout(
        Promise.all(Array.from({ length: 6 }, () => answer())),
        5_000,
        "the pool after the terminations",
      );
      expect(answers.map((r) => r[0]?.one)).toEqual([1, 1, 1, 1, 1, 1]);
    } finally {
      stop = true;
      await killer.end({ timeout: 1 });
      await database.close();
    }
  });
});
