import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { openDatabase } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * `pnpm demo` itself, as a process against a database of its own (real Postgres and NATS, its
 * own services as processes), on a tiny sandbox: what it prints, in which order, and that its
 * run's verification is over before it stops the services.
 */
let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await database?.drop();
});

function demo(args: string[]): Promise<{ code: number | null; out: string }> {
  const main = fileURLToPath(new URL("../src/demo.ts", import.meta.url));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", "--conditions=@drover/source", main, ...args], {
      env: { ...process.env, DATABASE_URL: database.url },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      out += d.toString();
    });
    child.on("error", reject);
    child.on("exit", (code) => resolve({ code, out }));
  });
}

describe("pnpm demo", { timeout: 240_000 }, () => {
  it("prints the coordinator's address, the table with its legend, and the verification per kind, which is over before it stops", async () => {
    const { code, out } = await demo(["--scale", "0.02", "--workers", "1", "--tenant", "demo-test"]);
    expect(code, out).toBe(0);
    expect(out).toMatch(
      /^Coordinator \(gRPC\): 127\.0\.0\.1:\d+; the CLI reaches it with DROVER_ADDRESS=127\.0\.0\.1:\d+ DROVER_TOKEN=drv_\S+$/m,
    );
    expect(out).toMatch(/^kind +imported +matched +already here +skipped +failed$/m);
    expect(out).toMatch(/^ {2}matched: the product already had an equivalent record/m);
    const verifying = out.indexOf("Verifying the run against the sandbox");
    const verified = out.indexOf("\nVerified: ");
    expect(verifying).toBeGreaterThan(0);
    expect(verified).toBeGreaterThan(verifying);
    expect(out.slice(verified)).toMatch(
      /\nkind +source +ledger +failed +sampled +mismatches\n[─ ]+\norganizations +30 +\d+ /,
    );
    expect(out).toMatch(/Every one of the \d+ source rows is accounted for: .* the run is verified\.\n$/);

    // Nothing of the run's verification is left for the next demo's workers to retry.
    const runId = /^StartRun: run (\S+)/m.exec(out)![1]!;
    const { db, close } = openDatabase(database.url, { max: 1 });
    try {
      const requests = await db.execute<{ status: string }>(
        sql`select status from drover.verification_requests where run_id = ${runId}::uuid`,
      );
      expect(requests.map((r) => r.status)).toEqual(["done"]);
      const [run] = await db.execute<{ ok: boolean }>(
        sql`select (verification ->> 'ok')::boolean as ok from drover.runs where id = ${runId}::uuid`,
      );
      expect(run!.ok).toBe(true);
    } finally {
      await close();
    }
  });

  it("--source hubspot imports HubSpot's sandbox the same way: every object type in the table, verified", async () => {
    const { code, out } = await demo([
      "--source",
      "hubspot",
      "--scale",
      "0.02",
      "--workers",
      "1",
      "--tenant",
      "demo-hubspot-test",
    ]);
    expect(code, out).toBe(0);
    expect(out).toMatch(/^Starting the HubSpot sandbox, 1 coordinator and 1 workers/m);
    for (const type of ["companies", "contacts", "deals", "notes", "emails", "calls", "tasks", "meetings"])
      expect(out).toMatch(new RegExp(`^${type} +\\d+ +\\d+ +\\d+ +\\d+ +\\d+$`, "m"));
    expect(out.slice(out.indexOf("\nVerified: "))).toMatch(/\ncompanies +30 +30 +0 +30 +0\n/);
    expect(out).toMatch(/Every one of the \d+ source rows is accounted for: .* the run is verified\.\n$/);
  });
});
