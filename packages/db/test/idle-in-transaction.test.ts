import { sql } from "drizzle-orm";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isConnectionError, openDatabase, pgErrorCode } from "../src/index.js";
import { createTestDatabase, type TestDatabase } from "../src/testing.js";

/**
 * A process cut off from the database in the middle of a transaction (a partition, a frozen host)
 * goes silent: the server sees an idle transaction and, without a limit, keeps it and its locks
 * for as long as the kernel takes to notice the dead peer (hours). The coordinator's dispatch lock
 * held that way stalls every run. A silent client looks exactly like this from the server's side:
 * a transaction that sends its lock and then nothing more.
 */
let testDb: TestDatabase;
let other: postgres.Sql;
beforeAll(async () => {
  testDb = await createTestDatabase();
  other = postgres(testDb.url, { max: 1, onnotice: () => {} });
});
afterAll(async () => {
  await other?.end({ timeout: 5 });
  await testDb?.drop();
});

const LOCK = 0x1d1e;

/**
 * Takes the advisory lock in a transaction and falls silent (`holding` resolves then) until `wake()`;
 * then tries one more statement. `done` resolves with that transaction's error, if any.
 */
function silentHolder(db: ReturnType<typeof openDatabase>["db"]) {
  let locked!: () => void;
  const holding = new Promise<void>((resolve) => {
    locked = resolve;
  });
  let wake!: () => void;
  const woken = new Promise<void>((resolve) => {
    wake = resolve;
  });
  const done = db
    .transaction(async (tx) => {
      await tx.execute(sql`select pg_advisory_xact_lock(${LOCK})`);
      locked();
      await woken;
      await tx.execute(sql`select 1`);
    })
    .then(
      () => undefined,
      (err: unknown) => err,
    );
  return { holding, done, wake };
}

/** Whether another session gets the lock within `waitMs` (lock_timeout), and how long it took. */
async function takeLock(waitMs: number): Promise<{ took: boolean; ms: number }> {
  const started = Date.now();
  try {
    await other.begin(async (tx) => {
      await tx`select set_config('lock_timeout', ${`${waitMs}ms`}, true)`;
      await tx`select pg_advisory_xact_lock(${LOCK})`;
    });
    return { took: true, ms: Date.now() - started };
  } catch (err) {
    if (pgErrorCode(err) !== "55P03") throw err;
    return { took: false, ms: Date.now() - started };
  }
}

describe("a transaction whose client falls silent", () => {
  it("frees its locks after silentClientMs, and the pool goes on with a fresh connection", async () => {
    const database = openDatabase(testDb.url, { max: 1, silentClientMs: 600 });
    // A client cut off while the server sends it an answer is given up on the same clock.
    const [tcp] = await database.db.execute<{ tcp_user_timeout: string }>(sql`show tcp_user_timeout`);
    expect(tcp?.tcp_user_timeout).toBe("600");
    const holder = silentHolder(database.db);
    try {
      await holder.holding;
      const taken = await takeLock(10_000);
      expect(taken.took).toBe(true);
      expect(taken.ms).toBeLessThan(5_000);
      // The silent process, back, learns its transaction is gone (as a connection error: retried,
      // nothing of it committed) and its pool serves the next query.
      holder.wake();
      const err = await holder.done;
      expect(isConnectionError(err) || pgErrorCode(err) === "25P03").toBe(true);
      const [row] = await database.db.execute<{ ok: number }>(sql`select 1 as ok`);
      expect(row?.ok).toBe(1);
    } finally {
      holder.wake();
      await database.close();
    }
  });

  it("keeps them while it is silent when the pool sets no limit (why the limit is needed)", async () => {
    const database = openDatabase(testDb.url, { max: 1 });
    const holder = silentHolder(database.db);
    try {
      await holder.holding;
      expect((await takeLock(2_000)).took).toBe(false);
      holder.wake();
      expect(await holder.done).toBeUndefined();
    } finally {
      holder.wake();
      await database.close();
    }
  });
});
