import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { openDatabase } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { runAssignment } from "@drover/engine";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { crmProviders as providers } from "./crm-providers.js";

/**
 * Fetch before transaction: a mail task lists a deal's messages and fetches every body, in
 * parallel and holding no database connection, before the window's transaction opens; the window
 * then writes them as one multi-row insert, without a savepoint. A spy on fetch and on the statements sent records the order.
 */
let testDb: TestDatabase;
let server: Server;
let baseUrl: string;
const events: string[] = [];
let inTransaction = false;
let fetchedInTransaction = false;

beforeAll(async () => {
  testDb = await createTestDatabase();
  server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    if (url.pathname === "/v1/deals/1/mailMessages") {
      events.push("list");
      const data = [11, 12, 13].map((id) => ({
        object: "mailMessage",
        timestamp: "2024-01-01 00:00:00",
        data: {
          id,
          subject: `s${id}`,
          from: [{ email_address: "a@b.co" }],
          to: [],
          message_time: "2024-01-01 10:00:00",
        },
      }));
      res.end(
        JSON.stringify({
          success: true,
          data,
          additional_data: { pagination: { more_items_in_collection: false } },
        }),
      );
      return;
    }
    const body = /^\/v1\/mailbox\/mailMessages\/(\d+)$/.exec(url.pathname);
    if (body) {
      events.push("fetch");
      if (inTransaction) fetchedInTransaction = true;
      res.end(JSON.stringify({ success: true, data: { id: Number(body[1]), body: `<p>${body[1]}</p>` } }));
      return;
    }
    res.statusCode = 404;
    res.end("{}");
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await testDb.drop();
});

describe("mail task", () => {
  it("fetches every body before the window's transaction opens: fetch, fetch, fetch, window, written as one batch without savepoints", async () => {
    const database = openDatabase(testDb.url, {
      max: 3,
      debug: (query) => {
        const q = query.trim().toLowerCase();
        if (q === "begin") {
          inTransaction = true;
          events.push("window");
        } else if (q.startsWith("savepoint")) events.push("savepoint");
        else if (q.startsWith('insert into "app"."emails"')) events.push("insert emails");
        else if (q === "commit" || q === "rollback") inTransaction = false;
      },
    });
    try {
      const db = database.db;
      const [run] = await db.execute<{ id: string }>(sql`
        insert into drover.runs (tenant_id, source, source_account, kinds, plan, status, source_config, source_secret, current_phase)
        values ('t', 'crm', 'acct', '{mail}', '[["mail"]]', 'running', ${JSON.stringify({ baseUrl, settings: {} })}::jsonb, 'tok', 0)
        returning id`);
      const [deal] = await db.execute<{ id: string }>(
        sql`insert into app.deals (tenant_id, title) values ('t', 'D') returning id`,
      );
      await db.execute(sql`insert into drover.ledger (tenant_id, source, source_account, kind, source_id, action, record_type, record_id, run_id)
                           values ('t', 'crm', 'acct', 'deals', '1', 'created', 'deal', ${deal!.id}, ${run!.id})`);
      const [task] = await db.execute<{ id: string }>(sql`
        insert into drover.tasks (run_id, kind, phase, seed_key, cursor)
        values (${run!.id}, 'mail', 0, 'mail:1', ${JSON.stringify({ deals: ["1"], index: 0 })}::jsonb) returning id`);
      events.length = 0;

      const outcome = await runAssignment(
        { db, providers, workerId: "spy", maxAttempts: 3, notesCap: 100 },
        Number(task!.id),
        { shutdown: new AbortController().signal, working: () => {} },
      );
      expect(outcome).toMatchObject({ status: "succeeded", summary: { created: 3 } });
      const firstWindow = events.indexOf("window");
      const upToWindow = events.slice(0, firstWindow + 1);
      expect(upToWindow.filter((e) => e !== "savepoint")).toEqual([
        "list",
        "fetch",
        "fetch",
        "fetch",
        "window",
      ]);
      const windowEvents = events.slice(firstWindow + 1);
      const nextWindow = windowEvents.indexOf("window");
      // Independent messages take the batched path: one multi-row insert, no savepoint at all.
      expect(windowEvents.slice(0, nextWindow === -1 ? undefined : nextWindow)).toEqual(["insert emails"]);
      expect(fetchedInTransaction).toBe(false);
    } finally {
      await database.close();
    }
  });
});
