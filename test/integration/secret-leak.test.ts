import { randomBytes } from "node:crypto";
import { Writable } from "node:stream";
import { parseSecretKeys, SecretKeyring } from "@drover/auth";
import {
  ExplainRecordResponseSchema,
  GetRunResponseSchema,
  ListNotesResponseSchema,
  ListRunsResponseSchema,
  RunStatus,
  StartRunResponseSchema,
  toJson,
  WatchRunResponseSchema,
} from "@drover/proto";
import { createLogger, initTelemetry } from "@drover/telemetry";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, rejection, startCluster, untilFinished } from "../support/in-process.js";

// Before anything starts a span: every span of the coordinator and the workers lands here.
const telemetry = initTelemetry({ serviceName: "secret-leak", exporter: "memory" });

/** Recognisable anywhere it might turn up. */
const TOKEN = `tok-LEAKCHECK-${randomBytes(9).toString("hex")}`;
const TENANT = "leak-tenant";

/** Every log line of the coordinator and the workers, at the most verbose level. */
const logLines: string[] = [];
const sink = new Writable({
  write(chunk, _encoding, done) {
    logLines.push(...String(chunk).split("\n").filter(Boolean));
    done();
  },
});
/** Whatever else this process writes to stdout and stderr meanwhile. */
const processOutput: string[] = [];
const responses: string[] = [];
const record = (text: string) => {
  responses.push(text);
  return text;
};

let c: Cluster;
const restore: (() => void)[] = [];

beforeAll(async () => {
  for (const stream of [process.stdout, process.stderr]) {
    const write = stream.write.bind(stream);
    stream.write = ((chunk: unknown, ...rest: unknown[]) => {
      processOutput.push(String(chunk));
      return (write as (...args: unknown[]) => boolean)(chunk, ...rest);
    }) as typeof stream.write;
    restore.push(() => {
      stream.write = write;
    });
  }
  c = await startCluster({
    workers: 2,
    // The sandbox accepts this token and no other: a run that succeeds proves the worker had it.
    sandbox: { tokens: [TOKEN], malformedRate: 0.05, transientErrorRate: 0.02 },
    apiKeys: { tenant: `tenant:${TENANT}` },
    loggers: {
      coordinator: createLogger("coordinator", { level: "trace", destination: sink }),
      worker: createLogger("worker", { level: "trace", destination: sink }),
    },
  });
});
afterAll(async () => {
  await c?.close();
  await telemetry.shutdown();
  for (const r of restore) r();
});

const json = (value: unknown) => JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? v.toString() : v));

describe("the source's API token", { timeout: 120_000 }, () => {
  it("works for the workers yet appears in no response, log line, note, span, error or plaintext column", async () => {
    const client = c.clientWith(c.tokens.tenant);
    const request = {
      tenantId: TENANT,
      source: "crm",
      sourceAccount: "acct",
      sourceConfig: { baseUrl: c.sandbox.url, apiToken: TOKEN, settings: { pageSize: "50", stripes: "2" } },
    };
    const started = await client.startRun(request);
    record(json(toJson(StartRunResponseSchema, started)));
    const runId = started.run!.id;

    // Errors that quote the request: a conflicting start, bad input next to the token.
    const errors = [
      await rejection(client.startRun(request)),
      await rejection(
        client.startRun({
          ...request,
          sourceAccount: "other",
          sourceConfig: { ...request.sourceConfig, baseUrl: "not a url" },
        }),
      ),
      await rejection(client.startRun({ ...request, sourceAccount: "other", kinds: ["widgets"] })),
      await rejection(
        client.startRun({
          ...request,
          sourceAccount: "other",
          sourceConfig: { ...request.sourceConfig, apiToken: `${TOKEN}\r\nx-evil: 1` },
        }),
      ),
    ];
    for (const err of errors) record(json({ code: err.code, message: err.message, details: err.details }));
    expect(errors.map((e) => e.code)).toEqual([6, 3, 3, 3]);

    for await (const update of client.watchRun({ runId }))
      record(json(toJson(WatchRunResponseSchema, update)));
    const done = await untilFinished(c, runId, 90_000);
    expect(done.status, done.error).toBe(RunStatus.SUCCEEDED);
    expect(done.progress.reduce((n, p) => n + p.imported, 0n)).toBeGreaterThan(300n);

    record(json(toJson(GetRunResponseSchema, await client.getRun({ runId }))));
    record(json(toJson(ListRunsResponseSchema, await client.listRuns({}))));
    record(json(toJson(ListRunsResponseSchema, await c.client.listRuns({ tenantId: TENANT }))));
    const notes = await client.listNotes({ runId, samples: 100 });
    expect(notes.groups.length).toBeGreaterThan(0); // malformed rows were really noted
    record(json(toJson(ListNotesResponseSchema, notes)));
    const failedId = notes.groups.find((g) => g.level === "error")?.sampleSubjectIds[0] ?? "1";
    const failedKind = notes.groups.find((g) => g.level === "error")?.kind ?? "persons";
    for (const [kind, sourceId] of [
      [failedKind, failedId],
      ["organizations", "1"],
    ] as const) {
      record(
        json(
          toJson(
            ExplainRecordResponseSchema,
            await client.explainRecord({
              tenantId: TENANT,
              source: "crm",
              sourceAccount: "acct",
              kind,
              sourceId,
            }),
          ),
        ),
      );
    }
    const stopErr = await rejection(client.stopRun({ runId }));
    record(json({ code: stopErr.code, message: stopErr.message }));

    // Let every task span end, then look everywhere.
    await Promise.all(c.workers.map((w) => w.stop()));
    await telemetry.forceFlush();

    for (const text of responses) expect(text).not.toContain(TOKEN);
    expect(responses.join("\n")).toContain(runId);

    expect(logLines.length).toBeGreaterThan(10);
    expect(logLines.some((l) => l.includes("run started"))).toBe(true);
    for (const line of logLines) expect(line).not.toContain(TOKEN);
    for (const chunk of processOutput) expect(chunk).not.toContain(TOKEN);
    for (const w of c.workers) expect(json(c.outcomesOf(w))).not.toContain(TOKEN);

    const spans = telemetry.memoryExporter!.getFinishedSpans();
    expect(spans.some((s) => s.name === "task")).toBe(true);
    expect(spans.some((s) => s.name === "drover.v1.RunService/StartRun")).toBe(true);
    for (const span of spans) {
      const text = json({
        name: span.name,
        attributes: span.attributes,
        events: span.events,
        status: span.status,
        links: span.links,
        resource: span.resource.attributes,
      });
      expect(text, span.name).not.toContain(TOKEN);
    }

    const noteRows = await c.database.db.execute(
      sql`select * from drover.notes where run_id = ${runId}::uuid`,
    );
    expect(noteRows.length).toBeGreaterThan(0);
    expect(json(noteRows)).not.toContain(TOKEN);

    // Every row of every table, as text: the token is nowhere in the database...
    const tables = await c.database.db.execute<{ schema: string; name: string }>(sql`
      select table_schema as schema, table_name as name from information_schema.tables
       where table_schema in ('drover', 'app') and table_type = 'BASE TABLE'`);
    expect(tables.length).toBeGreaterThan(8);
    for (const t of tables) {
      const [hit] = await c.database.db.execute<{ n: number }>(sql`
        select count(*)::int as n from ${sql.identifier(t.schema)}.${sql.identifier(t.name)} x
         where strpos(x::text, ${TOKEN}) > 0`);
      expect(hit!.n, `${t.schema}.${t.name}`).toBe(0);
    }
    // ...but the run holds it encrypted, under the cluster's key, and only for this run.
    const [run] = await c.database.db.execute<{
      source_secret: string | null;
      source_secret_ciphertext: string;
      source_secret_key_id: string;
    }>(
      sql`select source_secret, source_secret_ciphertext, source_secret_key_id from drover.runs where id = ${runId}::uuid`,
    );
    expect(run!.source_secret).toBeNull();
    expect(Buffer.from(run!.source_secret_ciphertext, "base64").toString("latin1")).not.toContain(
      "LEAKCHECK",
    );
    const keyring = new SecretKeyring(parseSecretKeys(c.secretKeys));
    const sealed = { keyId: run!.source_secret_key_id, ciphertext: run!.source_secret_ciphertext };
    expect(keyring.open(sealed, `drover.runs.source_secret:${runId}`)).toBe(TOKEN);
    expect(() =>
      keyring.open(sealed, `drover.runs.source_secret:${started.run!.id.replace(/.$/, "0")}x`),
    ).toThrow();
  });
});
