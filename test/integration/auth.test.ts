import { randomUUID } from "node:crypto";
import { bearer } from "@drover/auth";
import { keysCommand } from "@drover/coordinator";
import {
  Code,
  createClient,
  Health,
  HealthCheckResponse_ServingStatus,
  RunStatus,
  WorkerService,
} from "@drover/proto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, rejection, startCluster, until } from "../support/in-process.js";

/**
 * Who may call what, against a real coordinator: every RPC needs a bearer token; scopes decide
 * which service; a tenant's token sees and steers that tenant's runs only.
 */
let c: Cluster;
const A = `tenant-a-${randomUUID().slice(0, 6)}`;
const B = `tenant-b-${randomUUID().slice(0, 6)}`;

beforeAll(async () => {
  c = await startCluster({
    workers: 0,
    apiKeys: { a: `tenant:${A}`, b: `tenant:${B}`, both: `tenant:${A}+tenant:${B}` },
    coordinatorEnv: { DROVER_API_KEYS_REFRESH_MS: "100" },
  });
});
afterAll(async () => {
  await c?.close();
});

const workerClient = (token: string | undefined) =>
  createClient(WorkerService, c.coordinator.address, {
    metadata: () => (token === undefined ? {} : bearer(token)),
  });

describe("authentication", { timeout: 60_000 }, () => {
  it("a call without a credential, with an unknown one or a malformed header is UNAUTHENTICATED", async () => {
    const anonymous = c.clientWith(undefined);
    const stranger = c.clientWith("drv_not-a-key-anyone-issued");
    const basic = createClient(WorkerService, c.coordinator.address, {
      metadata: () => ({ authorization: "Basic YWRtaW46YWRtaW4=" }),
    });
    const noWorker = workerClient(undefined);
    try {
      const calls: [string, () => Promise<unknown>][] = [
        ["ListRuns, no credential", () => anonymous.listRuns({})],
        ["GetRun, no credential", () => anonymous.getRun({ runId: randomUUID() })],
        [
          "StartRun, no credential",
          () => anonymous.startRun({ tenantId: A, source: "crm", sourceAccount: "x" }),
        ],
        ["ListRuns, unknown token", () => stranger.listRuns({})],
        ["TaskFinished, no credential", () => noWorker.taskFinished({ runId: randomUUID(), taskId: "1" })],
        ["TaskFinished, Basic auth", () => basic.taskFinished({ runId: randomUUID(), taskId: "1" })],
      ];
      for (const [what, call] of calls) {
        const err = await rejection(call());
        expect(err.code, what).toBe(Code.UNAUTHENTICATED);
      }
      const err = await rejection(anonymous.listRuns({}));
      expect(err.message).toMatch(/authorization: Bearer <token>/);
    } finally {
      basic.close();
      noWorker.close();
    }
  });

  it("a worker token on RunService and a tenant token on WorkerService are PERMISSION_DENIED", async () => {
    const asWorker = c.clientWith(c.tokens.worker);
    for (const call of [() => asWorker.listRuns({}), () => asWorker.getRun({ runId: randomUUID() })]) {
      const err = await rejection(call());
      expect(err.code).toBe(Code.PERMISSION_DENIED);
      expect(err.message).toMatch(/key "worker-key" \(worker\) may not call drover\.v1\.RunService/);
    }
    const tenantOnWorkers = workerClient(c.tokens.a);
    try {
      for (const call of [
        () => tenantOnWorkers.taskFinished({ runId: randomUUID(), taskId: "1" }),
        () => tenantOnWorkers.leaseBudget({ source: "crm", sourceAccount: "acct", want: 1 }),
        () => tenantOnWorkers.reportBudget({ source: "crm", sourceAccount: "acct" }),
      ]) {
        const err = await rejection(call());
        expect(err.code).toBe(Code.PERMISSION_DENIED);
        expect(err.message).toMatch(/may not call drover\.v1\.WorkerService/);
      }
    } finally {
      tenantOnWorkers.close();
    }
  });

  it("the worker token reaches WorkerService, and admin reaches both", async () => {
    const asWorker = workerClient(c.tokens.worker);
    const asAdmin = workerClient(c.tokens.admin);
    try {
      // Past authentication and scopes, the handler itself answers: there is no such task in that run.
      for (const client of [asWorker, asAdmin]) {
        const err = await rejection(
          client.taskFinished({ runId: randomUUID(), taskId: "1", outcome: "succeeded" }),
        );
        expect(err.code).toBe(Code.NOT_FOUND);
        expect(err.message).toMatch(/^task 1 is not a task of run /);
      }
      await expect(c.client.listRuns({})).resolves.toBeDefined();
    } finally {
      asWorker.close();
      asAdmin.close();
    }
  });

  it("the health check answers without any credential", async () => {
    const health = createClient(Health, c.coordinator.address);
    try {
      expect((await health.check({ service: "" })).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
      expect((await health.check({ service: "drover.v1.RunService" })).status).toBe(
        HealthCheckResponse_ServingStatus.SERVING,
      );
    } finally {
      health.close();
    }
  });

  it("keys issued with the keys command work within the refresh interval, and stop working once revoked", async () => {
    const lines: string[] = [];
    const io = { env: { DATABASE_URL: c.testDb.url }, out: (l: string) => lines.push(l), err: () => {} };
    expect(
      await keysCommand(["issue", "--scope", `tenant:${A}`, "--id", "issued-a", "--note", "test"], io),
    ).toBe(0);
    const issued = JSON.parse(lines.pop()!) as { token: string; key_id: string; scopes: string };
    expect(issued).toMatchObject({ key_id: "issued-a", scopes: `tenant:${A}` });
    const [row] = await c.database.db.execute<{ token_hash: string; scopes: string[] }>(
      sql`select token_hash, scopes from drover.api_keys where key_id = 'issued-a'`,
    );
    expect(row!.token_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(row!.token_hash).not.toContain(issued.token);

    const holder = c.clientWith(issued.token);
    await until(
      async () =>
        (await holder
          .listRuns({})
          .then(() => true)
          .catch(() => false)) || undefined,
      5_000,
    );
    // Still a tenant key: RunService yes, WorkerService no.
    const asWorker = workerClient(issued.token);
    expect((await rejection(asWorker.taskFinished({ runId: randomUUID(), taskId: "1" }))).code).toBe(
      Code.PERMISSION_DENIED,
    );
    asWorker.close();

    expect(await keysCommand(["revoke", "issued-a"], io)).toBe(0);
    await until(
      async () =>
        (await holder.listRuns({}).then(
          () => false,
          (err: { code?: number }) => err.code === Code.UNAUTHENTICATED,
        )) || undefined,
      5_000,
    );
    expect(await keysCommand(["revoke", "issued-a"], io)).toBe(1);
    expect(await keysCommand(["issue", "--scope", "root"], io)).toBe(2);
  });
});

describe("tenant scoping", { timeout: 60_000 }, () => {
  let runA = "";
  let runB = "";

  beforeAll(async () => {
    const start = (token: string | undefined, tenantId: string) =>
      c.clientWith(token).startRun({
        tenantId,
        source: "crm",
        sourceAccount: "acct",
        kinds: ["organizations"],
        sourceConfig: { baseUrl: c.sandbox.url, apiToken: "tok", settings: { pageSize: "50" } },
      });
    runA = (await start(c.tokens.a, A)).run!.id;
    runB = (await start(c.tokens.b, B)).run!.id;
  });

  it("a tenant's token cannot start a run for another tenant", async () => {
    const err = await rejection(
      c.clientWith(c.tokens.a).startRun({
        tenantId: B,
        source: "crm",
        sourceAccount: "other",
        sourceConfig: { baseUrl: c.sandbox.url, apiToken: "tok" },
      }),
    );
    expect(err.code).toBe(Code.PERMISSION_DENIED);
    const [n] = await c.database.db.execute<{ n: number }>(
      sql`select count(*)::int as n from drover.runs where tenant_id = ${B} and source_account = 'other'`,
    );
    expect(n!.n).toBe(0);
  });

  it("another tenant's run is NOT_FOUND for every call, in the same words as a run that does not exist", async () => {
    const asA = c.clientWith(c.tokens.a);
    const calls = (runId: string): [string, () => Promise<unknown>][] => [
      ["GetRun", () => asA.getRun({ runId })],
      ["StopRun", () => asA.stopRun({ runId })],
      ["ResumeRun", () => asA.resumeRun({ runId })],
      ["RetryRun", () => asA.retryRun({ runId })],
      ["ListNotes", () => asA.listNotes({ runId })],
      [
        "WatchRun",
        async () => {
          for await (const _ of asA.watchRun({ runId })) {
            // never reached
          }
        },
      ],
    ];
    const missing = randomUUID();
    for (const [name, call] of calls(runB)) {
      const err = await rejection(call());
      expect(err.code, name).toBe(Code.NOT_FOUND);
      expect(err.message, name).toBe(`run ${runB} does not exist`);
    }
    for (const [name, call] of calls(missing)) {
      const err = await rejection(call());
      expect(err.code, name).toBe(Code.NOT_FOUND);
      expect(err.message, name).toBe(`run ${missing} does not exist`);
    }
    // B's run was not touched by A's StopRun.
    expect((await c.client.getRun({ runId: runB })).run!.status).toBe(RunStatus.RUNNING);
  });

  it("ExplainRecord for another tenant is NOT_FOUND", async () => {
    const err = await rejection(
      c.clientWith(c.tokens.a).explainRecord({
        tenantId: B,
        source: "crm",
        sourceAccount: "acct",
        kind: "organizations",
        sourceId: "1",
      }),
    );
    expect(err.code).toBe(Code.NOT_FOUND);
    const own = await c.clientWith(c.tokens.a).explainRecord({
      tenantId: A,
      source: "crm",
      sourceAccount: "acct",
      kind: "organizations",
      sourceId: "1",
    });
    expect(own.found).toBe(false);
  });

  it("ListRuns shows a tenant its own runs only, whatever it asks for", async () => {
    const asA = c.clientWith(c.tokens.a);
    expect((await asA.listRuns({})).runs.map((r) => r.id)).toEqual([runA]);
    expect((await asA.listRuns({ tenantId: A })).runs.map((r) => r.id)).toEqual([runA]);
    expect((await asA.listRuns({ tenantId: B })).runs).toEqual([]);
    const both = await c.clientWith(c.tokens.both).listRuns({});
    expect(new Set(both.runs.map((r) => r.id))).toEqual(new Set([runA, runB]));
    const all = await c.client.listRuns({});
    expect(all.runs.map((r) => r.id)).toEqual(expect.arrayContaining([runA, runB]));
  });

  it("a tenant steers its own run", async () => {
    const asA = c.clientWith(c.tokens.a);
    expect((await asA.getRun({ runId: runA })).run!.tenantId).toBe(A);
    const { run } = await asA.stopRun({ runId: runA });
    expect(run!.status).toBe(RunStatus.STOPPED);
    expect((await asA.resumeRun({ runId: runA })).run!.status).toBe(RunStatus.RUNNING);
    await asA.stopRun({ runId: runA });
    await c.client.stopRun({ runId: runB });
  });
});

describe("input at the edge", { timeout: 60_000 }, () => {
  const request = (patch: Record<string, unknown> = {}) => ({
    tenantId: A,
    source: "crm",
    sourceAccount: "edge",
    sourceConfig: {
      baseUrl: c.sandbox.url,
      apiToken: "tok-edge-secret",
      settings: {} as Record<string, string>,
    },
    ...patch,
  });

  it("refuses control characters, oversized settings and a token that could smuggle headers, never quoting the token", async () => {
    const cases: [string, ReturnType<typeof request>, RegExp][] = [
      [
        "a NUL in the account",
        request({ sourceAccount: "a\u0000b" }),
        /source_account holds control characters/,
      ],
      [
        "a header in the token",
        request({
          sourceConfig: { baseUrl: c.sandbox.url, apiToken: "tok-edge-secret\r\nx-evil: 1", settings: {} },
        }),
        /source_config.api_token holds control characters/,
      ],
      [
        "a long setting",
        request({
          sourceConfig: { baseUrl: c.sandbox.url, apiToken: "t", settings: { pageSize: "9".repeat(2000) } },
        }),
        /source_config.settings.pageSize is longer than 1024 characters/,
      ],
    ];
    for (const [name, req, message] of cases) {
      const err = await rejection(c.client.startRun(req));
      expect(err.code, name).toBe(Code.INVALID_ARGUMENT);
      expect(err.message, name).toMatch(message);
      expect(err.message, name).not.toContain("tok-edge-secret");
    }
  });
});
