import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { generateSecretKey, parseSecretKeys, SecretKeyring } from "@drover/auth";
import { openDatabase } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { standInId } from "../src/fields.js";
import { drainKinds, verifyCrmRun } from "./crm-drain.js";
import { insertCrmRun } from "./crm-run.js";

/**
 * A row without a usable id is noted as failed by the import and listed again by verification: both
 * must name it alike, whatever page size and partitions the import walked with.
 */
let testDb: TestDatabase;
let database: ReturnType<typeof openDatabase>;
let server: Server;
let baseUrl: string;
const TOKEN = "stand-in-token";
const secrets = new SecretKeyring(parseSecretKeys(generateSecretKey("stand-in")));

type Row = Record<string, unknown>;
/** Every third row has no id; every fifth is hidden from the list (as archived deals are from theirs). */
const ROWS: (Row & { hidden: boolean })[] = Array.from({ length: 23 }, (_, i) => ({
  ...(i % 3 === 1 ? {} : { id: i + 1 }),
  name: `Organization ${i + 1}`,
  add_time: "2024-01-01T00:00:00Z",
  update_time: new Date(Date.UTC(2024, 0, 1 + i)).toISOString().replace(".000", ""),
  custom_fields: {},
  hidden: i % 5 === 3,
}));

/**
 * /api/v2/organizations as Pipedrive serves a filtered list: a cursor is a position in the whole
 * ordering, a page looks at `limit` positions and leaves out the rows the list hides, so pages come
 * back short. updated_since / updated_until / sort_by update_time are honoured (the partition split).
 */
function answer(query: URLSearchParams): unknown {
  const limit = Number(query.get("limit") ?? 100);
  const since = query.get("updated_since");
  const until = query.get("updated_until");
  const inRange = ROWS.filter(
    (r) =>
      (!since || Date.parse(r.update_time as string) >= Date.parse(since)) &&
      (!until || Date.parse(r.update_time as string) < Date.parse(until)),
  );
  const start = Number(query.get("cursor") ?? 0);
  const window = inRange.slice(start, start + limit);
  const data = window.filter((r) => !r.hidden).map(({ hidden: _, ...r }) => r);
  const more = start + limit < inRange.length;
  return { success: true, data, additional_data: { next_cursor: more ? String(start + limit) : null } };
}

beforeAll(async () => {
  testDb = await createTestDatabase();
  database = openDatabase(testDb.url, { max: 4 });
  server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    res.setHeader("content-type", "application/json");
    if (url.pathname === "/api/v2/organizations") return res.end(JSON.stringify(answer(url.searchParams)));
    res.statusCode = 404;
    res.end(JSON.stringify({ success: false, error: "not found" }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await database?.close();
  await testDb?.drop();
});

let tenants = 0;

describe("a row without a usable id", () => {
  const cases: Record<string, string>[] = [{ pageSize: "4" }, { pageSize: "4", partitions: "3" }];
  for (const settings of cases) {
    it(`is named alike by the import and by verification (${JSON.stringify(settings)})`, async () => {
      const tenantId = `stand-in-${++tenants}`;
      const runId = await insertCrmRun(database.db, secrets, {
        tenantId,
        sourceAccount: tenantId,
        kinds: ["organizations"],
        baseUrl,
        token: TOKEN,
        settings,
        startedAt: new Date(Date.UTC(2025, 0, 1)),
      });
      const tasks = await drainKinds(database.db, secrets, runId, [["organizations"]]);
      expect(tasks.filter((t) => t.status !== "succeeded")).toEqual([]);
      const noted = await database.db.execute<{ subject_id: string }>(sql`
        select distinct subject_id from drover.notes
         where run_id = ${runId}::uuid and reason = 'the row has no usable id' order by 1`);
      const idless = ROWS.filter((r) => !r.hidden && r.id === undefined).map(({ hidden: _, ...r }) =>
        standInId("organizations", 0, r),
      );
      expect(noted.map((n) => n.subject_id)).toEqual([...idless].sort());

      const result = await verifyCrmRun(database.db, runId, TOKEN, 0);
      expect(result.kinds.map((k) => [k.kind, k.mismatches])).toEqual([["organizations", []]]);
      expect(result.kinds[0]).toMatchObject({
        sourceCount: ROWS.filter((r) => !r.hidden).length,
        failedCount: idless.length,
      });
      expect(result.ok).toBe(true);
    });
  }
});
