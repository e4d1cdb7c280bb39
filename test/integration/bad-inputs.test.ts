import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { bearer } from "@drover/auth";
import { Code, RunStatus } from "@drover/proto";
import { loadReceiverConfig, startReceiver } from "@drover/receiver";
import { standInId } from "@drover/source-crm";
import { createLogger } from "@drover/telemetry";
import { loadWorkerConfig, startWorker, type Worker } from "@drover/worker";
import { credentials, Client as GrpcClient, Metadata, type ServiceError } from "@grpc/grpc-js";
import { sql } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  API_TOKEN,
  type Cluster,
  rejection,
  SETTINGS,
  startCluster,
  untilFinished,
} from "../support/in-process.js";

/**
 * Invalid calls, table-driven: each gets the right gRPC code and a message that says what to fix,
 * and writes nothing. Extends the StartRun cases of run-service.test.ts (empty tenant, unknown source
 * and kind, bad base_url, missing token, absurd and unknown settings, unknown run ids of
 * GetRun/StopRun/ResumeRun, StopRun of a succeeded run, ResumeRun of a running one) rather than
 * repeating them. Then untrusted source responses, through the engine: malformed JSON, rows without
 * ids, a huge field and a huge response become row or task errors with reasons, never a crash.
 */
let c: Cluster;
const live: string[] = [];

beforeAll(async () => {
  // Two attempts, as the worker of the untrusted-source test has: the two must agree.
  c = await startCluster({ workers: 0, coordinatorEnv: { DROVER_MAX_ATTEMPTS: "2" } });
});
afterAll(async () => {
  await c?.close();
});
afterEach(async () => {
  for (const runId of live.splice(0)) await c.client.stopRun({ runId }).catch(() => {});
});

type Client = Cluster["client"];
const tenant = (name: string) => `${name}-${randomUUID().slice(0, 8)}`;

/** Rows of the engine's tables: a refused call leaves every count as it was. */
async function footprint(): Promise<Record<string, number>> {
  const [row] = await c.database.db.execute<Record<string, number>>(sql`
    select (select count(*)::int from drover.runs) as runs, (select count(*)::int from drover.tasks) as tasks,
           (select count(*)::int from drover.notes) as notes, (select count(*)::int from drover.ledger) as ledger`);
  return row!;
}

/** A finished (or any) run written directly, for state-transition cases. */
async function runIn(status: string, withRunningTask = false): Promise<string> {
  const [row] = await c.database.db.execute<{ id: string }>(sql`
    insert into drover.runs (tenant_id, source, source_account, kinds, plan, status, current_phase, started_at, finished_at)
    values (${tenant(`state-${status}`)}, 'crm', ${`acct-${randomUUID()}`}, '{organizations}', '[["organizations"]]',
            ${status}, ${status === "succeeded" || status === "failed" ? 1 : 0}, now(),
            ${["succeeded", "failed", "stopped"].includes(status) ? sql`now()` : sql`null`})
    returning id`);
  if (withRunningTask) {
    await c.database.db.execute(sql`
      insert into drover.tasks (run_id, kind, phase, seed_key, cursor, status, locked_by, locked_at, attempts)
      values (${row!.id}::uuid, 'organizations', 0, 'organizations:page:0', '{}'::jsonb, 'running', 'elsewhere/1', now(), 1)`);
  }
  return row!.id;
}

const good = () => ({
  tenantId: tenant("bad"),
  source: "crm",
  sourceAccount: "acct",
  kinds: [] as string[],
  sourceConfig: {
    baseUrl: c.sandbox.url,
    apiToken: API_TOKEN,
    settings: { ...SETTINGS } as Record<string, string>,
  },
  dailyShare: undefined as number | undefined,
});
type StartRequest = ReturnType<typeof good>;
const startWith = (spoil: (r: StartRequest) => void) => (client: Client) => {
  const request = good();
  spoil(request);
  return client.startRun(request);
};

interface Case {
  name: string;
  call: (client: Client) => Promise<unknown>;
  code: Code;
  message: RegExp;
}

const BIG = "x".repeat(100_000);

const INVALID_CALLS: Case[] = [
  // StartRun: fields out of shape.
  {
    name: "StartRun, a tenant id with a space",
    call: startWith((r) => (r.tenantId = "acme corp")),
    code: Code.INVALID_ARGUMENT,
    message: /tenant_id must be 1-128 characters of letters, digits/,
  },
  {
    name: "StartRun, an empty source",
    call: startWith((r) => (r.source = "")),
    code: Code.INVALID_ARGUMENT,
    message: /^source is required$/,
  },
  {
    name: "StartRun, a 100,000-character source",
    call: startWith((r) => (r.source = BIG)),
    code: Code.INVALID_ARGUMENT,
    message: /^source is longer than 64 characters$/,
  },
  {
    name: "StartRun, an empty source account",
    call: startWith((r) => (r.sourceAccount = " ")),
    code: Code.INVALID_ARGUMENT,
    message: /^source_account is required$/,
  },
  {
    name: "StartRun, an oversized source account",
    call: startWith((r) => (r.sourceAccount = "a".repeat(257))),
    code: Code.INVALID_ARGUMENT,
    message: /^source_account is longer than 256 characters$/,
  },
  {
    name: "StartRun, more kinds than the source has",
    call: startWith((r) => (r.kinds = Array.from({ length: 1000 }, (_, i) => `kind${i}`))),
    code: Code.INVALID_ARGUMENT,
    message: /^kinds lists 1000 kinds; crm has 7$/,
  },
  {
    name: "StartRun, an empty kind name",
    call: startWith((r) => (r.kinds = ["persons", ""])),
    code: Code.INVALID_ARGUMENT,
    message: /unknown kind\(s\) "" for source crm; allowed kinds: organizations, persons/,
  },
  {
    name: "StartRun, a 100,000-character kind (quoted back cut short)",
    call: startWith((r) => (r.kinds = [BIG])),
    code: Code.INVALID_ARGUMENT,
    message: /^unknown kind\(s\) "x{64}" for source crm; allowed kinds: /,
  },
  {
    name: "StartRun, the crm's internal catch-up pass as a kind (a run of it alone reads nothing)",
    call: startWith((r) => (r.kinds = ["catch-up"])),
    code: Code.INVALID_ARGUMENT,
    message:
      /^"catch-up" is a pass every crm run gets by itself, not a kind to ask for; allowed kinds: organizations, persons, deals, leads, activities, notes, mail$/,
  },
  {
    name: "StartRun, a user kind with the internal catch-up pass",
    call: startWith((r) => (r.kinds = ["persons", "catch-up"])),
    code: Code.INVALID_ARGUMENT,
    message: /^"catch-up" is a pass every crm run gets by itself/,
  },
  {
    name: "StartRun, an oversized base_url",
    call: startWith((r) => (r.sourceConfig.baseUrl = `https://example.com/${"p".repeat(3000)}`)),
    code: Code.INVALID_ARGUMENT,
    message: /^source_config\.base_url is longer than 2048 characters$/,
  },
  {
    name: "StartRun, a base_url carrying credentials",
    call: startWith((r) => (r.sourceConfig.baseUrl = "https://me:secret@acme.pipedrive.com")),
    code: Code.INVALID_ARGUMENT,
    message: /base_url must not carry credentials; pass api_token instead/,
  },
  {
    name: "StartRun, a base_url that is not http(s)",
    call: startWith((r) => (r.sourceConfig.baseUrl = "ftp://acme.pipedrive.com")),
    code: Code.INVALID_ARGUMENT,
    message: /base_url must be http\(s\)/,
  },
  {
    name: "StartRun, an oversized api_token",
    call: startWith((r) => (r.sourceConfig.apiToken = "t".repeat(5000))),
    code: Code.INVALID_ARGUMENT,
    message: /^source_config\.api_token is longer than 4096 characters$/,
  },
  {
    name: "StartRun, 33 settings",
    call: startWith((r) => {
      r.sourceConfig.settings = Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, "1"]));
    }),
    code: Code.INVALID_ARGUMENT,
    message: /^source_config\.settings has more than 32 entries$/,
  },
  // StartRun: absurd option values.
  ...(
    [
      ["pageSize", "0", /pageSize must be an integer from 1 to 500, got "0"/],
      ["pageSize", "-5", /pageSize must be an integer from 1 to 500, got "-5"/],
      ["pageSize", "1e9", /pageSize must be an integer from 1 to 500, got "1e9"/],
      ["stripes", "NaN", /stripes must be an integer from 1 to 64, got "NaN"/],
      ["stripes", "2.5", /stripes must be an integer from 1 to 64, got "2.5"/],
      ["partitions", "0", /partitions must be an integer from 1 to 64, got "0"/],
      ["partitions", "65", /partitions must be an integer from 1 to 64, got "65"/],
      ["dealsPerMailTask", "1000000", /dealsPerMailTask must be an integer from 1 to 100/],
      ["bodyConcurrency", "99999999999999999999", /bodyConcurrency must be an integer from 1 to 16/],
    ] as const
  ).map(
    ([key, value, message]): Case => ({
      name: `StartRun, setting ${key}=${value}`,
      call: startWith((r) => (r.sourceConfig.settings[key] = value)),
      code: Code.INVALID_ARGUMENT,
      message,
    }),
  ),
  ...([0, -0.5, 1.5, Number.NaN] as const).map(
    (share): Case => ({
      name: `StartRun, daily_share ${share}`,
      call: startWith((r) => (r.dailyShare = share)),
      code: Code.INVALID_ARGUMENT,
      message: /^daily_share must be above 0 and at most 1 \(a share of the account's day\), got /,
    }),
  ),
  {
    name: "StartRun, a crm dailyReset that names no time zone",
    call: startWith((r) => (r.sourceConfig.settings.dailyReset = "Mars/Olympus")),
    code: Code.INVALID_ARGUMENT,
    message: /dailyReset must be an IANA time zone \(e\.g\. Europe\/Berlin\) or "probe", got "Mars\/Olympus"/,
  },
  {
    name: "StartRun, a pg-table run into a destination table that does not exist",
    call: (client) =>
      client.startRun({
        tenantId: tenant("bad"),
        source: "pg-table",
        sourceAccount: "tables",
        kinds: [],
        sourceConfig: {
          baseUrl: "",
          apiToken: c.testDb.url,
          settings: {
            table: "public.room_events",
            destination: "app.no_such_table",
            tenantColumn: "tenant_id",
            mapping: "id=id,data=data",
            from: "2024-01-01T00:00:00Z",
            to: "2024-01-02T00:00:00Z",
          },
        },
      }),
    code: Code.INVALID_ARGUMENT,
    message: /^source_config: destination table app\.no_such_table does not exist/,
  },
  // Run ids: malformed, and well-formed but unknown, on every RPC that takes one.
  ...(["getRun", "stopRun", "resumeRun", "retryRun", "verifyRun", "listNotes"] as const).flatMap(
    (rpc): Case[] => [
      {
        name: `${rpc}, a run id that is not a UUID`,
        call: (client) =>
          (client[rpc] as (r: { runId: string }) => Promise<unknown>)({ runId: "run-42; drop table" }),
        code: Code.INVALID_ARGUMENT,
        message: /^run_id must be a UUID, got "run-42; drop table"$/,
      },
      {
        name: `${rpc}, an empty run id`,
        call: (client) => (client[rpc] as (r: { runId: string }) => Promise<unknown>)({ runId: "" }),
        code: Code.INVALID_ARGUMENT,
        message: /^run_id is required$/,
      },
    ],
  ),
  ...(["retryRun", "verifyRun", "listNotes"] as const).map(
    (rpc): Case => ({
      name: `${rpc}, an unknown run id`,
      call: (client) =>
        (client[rpc] as (r: { runId: string }) => Promise<unknown>)({
          runId: "00000000-0000-4000-8000-000000000042",
        }),
      code: Code.NOT_FOUND,
      message: /^run 00000000-0000-4000-8000-000000000042 does not exist$/,
    }),
  ),
  {
    name: "WatchRun, an unknown run id",
    call: async (client) => {
      for await (const _ of client.watchRun({ runId: "00000000-0000-4000-8000-000000000043" })) {
        // never reached
      }
    },
    code: Code.NOT_FOUND,
    message: /^run 00000000-0000-4000-8000-000000000043 does not exist$/,
  },
  // Control characters in a value quoted back are escaped, never sent raw (a terminal or log
  // viewer showing the message would obey them).
  {
    name: "GetRun, a run id holding control characters (quoted back escaped)",
    call: (client) => client.getRun({ runId: "run\u001b[2J\r\nforged log line\u0000" }),
    code: Code.INVALID_ARGUMENT,
    message: /^run_id must be a UUID, got "run\\u001b\[2J\\r\\nforged log line\\u0000"$/,
  },
  {
    name: "StartRun, a kind holding control characters (quoted back escaped)",
    call: startWith((r) => (r.kinds = ["persons\u0007\n"])),
    code: Code.INVALID_ARGUMENT,
    message: /^unknown kind\(s\) "persons\\u0007\\n" for source crm; allowed kinds: /,
  },
  // A page token is the server's own: a forged one is refused as a page token, whatever it hides.
  ...(
    [
      ["garbage", "not base64 of a token"],
      [Buffer.from("2026-01-01T00:00:00Z|not-a-uuid").toString("base64url"), "a forged run id"],
      [Buffer.from("2026-01-01T00:00:00Z|").toString("base64url"), "no run id"],
      [
        Buffer.from("yesterday|00000000-0000-4000-8000-000000000042").toString("base64url"),
        "a forged instant",
      ],
    ] as const
  ).map(
    ([pageToken, what]): Case => ({
      name: `ListRuns, a page token with ${what}`,
      call: (client) => client.listRuns({ pageToken }),
      code: Code.INVALID_ARGUMENT,
      message: /^page_token is not a token this server issued$/,
    }),
  ),
  // Other absurd options.
  {
    name: "ListRuns, page_size 2^31-1",
    call: (client) => client.listRuns({ pageSize: 2_147_483_647 }),
    code: Code.INVALID_ARGUMENT,
    message: /^page_size must be between 1 and 500$/,
  },
  {
    name: "ListRuns, a negative page_size",
    call: (client) => client.listRuns({ pageSize: -1 }),
    code: Code.INVALID_ARGUMENT,
    message: /^page_size must be between 1 and 500$/,
  },
  {
    name: "ListRuns, a status that does not exist",
    call: (client) => client.listRuns({ statuses: [99 as RunStatus] }),
    code: Code.INVALID_ARGUMENT,
    message: /^statuses holds an unknown status$/,
  },
  {
    name: "ListRuns, an invalid tenant filter",
    call: (client) => client.listRuns({ tenantId: "../etc" }),
    code: Code.INVALID_ARGUMENT,
    message: /^tenant_id must be 1-128 characters/,
  },
  {
    name: "ExplainRecord, no source id",
    call: (client) =>
      client.explainRecord({
        tenantId: "acme",
        source: "crm",
        sourceAccount: "a",
        kind: "persons",
        sourceId: "",
      }),
    code: Code.INVALID_ARGUMENT,
    message: /^source_id is required$/,
  },
  {
    name: "ExplainRecord, an oversized source id",
    call: (client) =>
      client.explainRecord({
        tenantId: "acme",
        source: "crm",
        sourceAccount: "a",
        kind: "persons",
        sourceId: "1".repeat(300),
      }),
    code: Code.INVALID_ARGUMENT,
    message: /^source_id is longer than 256 characters$/,
  },
  {
    name: "ExplainRecord, an empty tenant",
    call: (client) =>
      client.explainRecord({
        tenantId: "",
        source: "crm",
        sourceAccount: "a",
        kind: "persons",
        sourceId: "1",
      }),
    code: Code.INVALID_ARGUMENT,
    message: /^tenant_id is required$/,
  },
];

/** Wrong state transitions: [what, status the run is in, the call, the message]. */
const TRANSITIONS: [string, string, boolean, (client: Client, runId: string) => Promise<unknown>, RegExp][] =
  [
    [
      "RetryRun of a succeeded run",
      "succeeded",
      false,
      (cl, runId) => cl.retryRun({ runId }),
      /is succeeded; only a failed run can be retried/,
    ],
    [
      "RetryRun of a stopped run",
      "stopped",
      false,
      (cl, runId) => cl.retryRun({ runId }),
      /is stopped; only a failed run can be retried/,
    ],
    [
      "ResumeRun of a failed run",
      "failed",
      false,
      (cl, runId) => cl.resumeRun({ runId }),
      /is failed; only a stopped run can be resumed/,
    ],
    [
      "ResumeRun of a stopping run",
      "stopping",
      true,
      (cl, runId) => cl.resumeRun({ runId }),
      /is stopping; only a stopped run can be resumed/,
    ],
    [
      "StopRun of a failed run",
      "failed",
      false,
      (cl, runId) => cl.stopRun({ runId }),
      /has already failed; only a running run can be stopped/,
    ],
    [
      "VerifyRun of a stopping run",
      "stopping",
      true,
      (cl, runId) => cl.verifyRun({ runId }),
      /is stopping; it is verified automatically when it finishes/,
    ],
  ];

describe("invalid RPCs", { timeout: 60_000 }, () => {
  it.each(INVALID_CALLS.map((k) => [k.name, k] as const))("%s", async (_name, k) => {
    const before = await footprint();
    const err = await rejection(k.call(c.client));
    expect({ code: err.code, message: err.message }).toEqual({
      code: k.code,
      message: expect.stringMatching(k.message),
    });
    expect(await footprint()).toEqual(before);
  });

  it.each(TRANSITIONS)(
    "%s answers FAILED_PRECONDITION naming its state and changes nothing",
    async (_name, status, withTask, call, message) => {
      const runId = await runIn(status, withTask);
      const [was] = await c.database.db.execute(
        sql`select status, updated_at, current_phase from drover.runs where id = ${runId}::uuid`,
      );
      const before = await footprint();
      const err = await rejection(call(c.client, runId));
      expect(err.code).toBe(Code.FAILED_PRECONDITION);
      expect(err.message).toMatch(new RegExp(`^run ${runId} `));
      expect(err.message).toMatch(message);
      expect(await footprint()).toEqual(before);
      const [now] = await c.database.db.execute(
        sql`select status, updated_at, current_phase from drover.runs where id = ${runId}::uuid`,
      );
      expect(now).toEqual(was);
    },
  );

  it("RetryRun and VerifyRun of a running run answer FAILED_PRECONDITION", async () => {
    const { run } = await c.client.startRun(good());
    live.push(run!.id);
    const before = await footprint();
    const retry = await rejection(c.client.retryRun({ runId: run!.id }));
    expect([retry.code, retry.message]).toEqual([
      Code.FAILED_PRECONDITION,
      `run ${run!.id} is running; only a failed run can be retried`,
    ]);
    const verify = await rejection(c.client.verifyRun({ runId: run!.id }));
    expect([verify.code, verify.message]).toEqual([
      Code.FAILED_PRECONDITION,
      `run ${run!.id} is running; it is verified automatically when it finishes, or verify it then`,
    ]);
    expect(await footprint()).toEqual(before);
  });

  it("a request too large for the server answers RESOURCE_EXHAUSTED and writes nothing", async () => {
    const before = await footprint();
    const err = await rejection(startWith((r) => (r.tenantId = "t".repeat(5 * 1024 * 1024)))(c.client));
    expect(err.code).toBe(Code.RESOURCE_EXHAUSTED);
    expect(err.message).toMatch(/larger than max \(\d+ vs 4194304\)/);
    expect(await footprint()).toEqual(before);
  });
});

describe("malformed request bodies, as raw bytes through a plain grpc-js client", { timeout: 30_000 }, () => {
  const raw = () => new GrpcClient(c.coordinator.address, credentials.createInsecure());
  const call = (client: GrpcClient, method: string, body: Buffer) =>
    new Promise<ServiceError>((resolve, reject) => {
      const metadata = new Metadata();
      for (const [k, v] of Object.entries(bearer(c.tokens.admin!))) metadata.set(k, v);
      client.makeUnaryRequest(
        `/drover.v1.RunService/${method}`,
        (b: Buffer) => b,
        (b: Buffer) => b,
        body,
        metadata,
        (err) => (err ? resolve(err) : reject(new Error(`${method} accepted a malformed body`))),
      );
    });
  const BODIES: [string, string, number[], RegExp][] = [
    [
      "StartRun",
      "garbage bytes",
      [0xff, 0xff, 0xff, 0xff],
      /^malformed drover\.v1\.StartRunRequest: premature EOF$/,
    ],
    [
      "StartRun",
      "a length past the end",
      [0x0a, 0x10, 0x61],
      /^malformed drover\.v1\.StartRunRequest: premature EOF$/,
    ],
    [
      "StartRun",
      "field number 0",
      [0x00, 0x01],
      /^malformed drover\.v1\.StartRunRequest: illegal tag: field no 0/,
    ],
    [
      "StartRun",
      "a tenant id that is not UTF-8",
      [0x0a, 0x02, 0xc3, 0x28],
      /^malformed drover\.v1\.StartRunRequest: .*not valid for encoding utf-8/,
    ],
    ["GetRun", "garbage bytes", [0xff, 0xff], /^malformed drover\.v1\.GetRunRequest: premature EOF$/],
    [
      "VerifyRun",
      "a truncated run id",
      [0x0a, 0x24, 0x30],
      /^malformed drover\.v1\.VerifyRunRequest: premature EOF$/,
    ],
  ];
  it.each(BODIES)(
    "%s with %s answers INVALID_ARGUMENT and writes nothing",
    async (method, _what, bytes, message) => {
      const client = raw();
      try {
        const before = await footprint();
        const err = await call(client, method, Buffer.from(bytes));
        expect({ code: err.code, details: err.details }).toEqual({
          code: Code.INVALID_ARGUMENT,
          details: expect.stringMatching(message),
        });
        expect(await footprint()).toEqual(before);
      } finally {
        client.close();
      }
    },
  );
});

const org = (id: unknown, name: unknown) => ({
  id,
  name,
  add_time: "2024-01-02 03:04:05",
  update_time: "2024-01-02 03:04:05",
});
const BAD_ORGANIZATIONS = [
  org(1, "Good One"),
  org(undefined, "No Id"),
  org({ value: 3 }, "Object Id"),
  org(4, "n".repeat(2_000_000)),
  org(5, "Good Five"),
  7,
  null,
];
const BAD_LEADS = [
  { id: "not-a-uuid-but-ok", title: { nested: true } },
  { id: "x".repeat(100), title: "t" },
  { id: "lead-3", title: 42 },
];

/**
 * A source that answers badly, as the crm base_url: organizations come with a row without an id,
 * a row whose id is an object, a row with a 2 MB name and good rows; persons are malformed JSON;
 * deals are a 40 MB response; leads are garbage of the wrong shape everywhere.
 */
function badSource(): Promise<{ url: string; server: Server; hits: Map<string, number> }> {
  const hits = new Map<string, number>();
  const page = (data: unknown) =>
    JSON.stringify({
      success: true,
      data,
      additional_data: { pagination: { start: 0, limit: 50, more_items_in_collection: false } },
    });
  const cursorPage = (data: unknown) =>
    JSON.stringify({ success: true, data, additional_data: { next_cursor: null } });
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://x").pathname;
    hits.set(path, (hits.get(path) ?? 0) + 1);
    res.setHeader("content-type", "application/json");
    switch (path) {
      case "/api/v2/organizations":
        return res.end(cursorPage(BAD_ORGANIZATIONS));
      case "/api/v2/persons":
        return res.end('{"success":true,"data":[{"id":1,"name":"Ann"');
      case "/v1/notes":
        // One row, malformed: it fails with its reason, the task does not ("every row failed" needs a few).
        return res.end(page([{ id: 77, content: 5 }]));
      case "/api/v2/deals":
        res.setHeader("content-length", String(40 * 1024 * 1024));
        return res.end();
      case "/api/v2/deals/archived":
        return res.end(cursorPage([]));
      case "/v1/leads/archived":
        return res.end(JSON.stringify({ success: true, data: null }));
      case "/v1/leads":
        return res.end(page(BAD_LEADS));
      default:
        res.statusCode = 404;
        return res.end(JSON.stringify({ success: false, error: "not found" }));
    }
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, hits }),
    ),
  );
}

/** A worker of two attempts, as the cluster's coordinator has: a page that is never JSON fails its task within seconds. */
function untrustedWorker(name: string): Promise<Worker> {
  return startWorker(
    loadWorkerConfig({
      DATABASE_URL: c.testDb.url,
      NATS_URL: process.env.NATS_URL ?? "127.0.0.1:4222",
      DROVER_COORDINATOR_ADDRESS: c.coordinator.address,
      DROVER_LANE_WIDTH: "2",
      DROVER_QUEUE_PREFIX: c.prefix,
      DROVER_WORKER_ID: `${c.prefix}-${name}`,
      DROVER_MAX_ATTEMPTS: "2",
      DROVER_SHUTDOWN_GRACE_MS: "2000",
      DROVER_WORKER_TOKEN: c.tokens.worker!,
      DROVER_SECRET_KEYS: c.secretKeys,
    }),
    { logger: createLogger("worker", { level: "fatal" }) },
  );
}

describe("untrusted source responses", { timeout: 60_000 }, () => {
  it("become row errors and task errors with reasons; the worker keeps working", async () => {
    const source = await badSource();
    let worker: Worker | undefined;
    try {
      worker = await untrustedWorker("untrusted");
      const { run } = await c.client.startRun({
        tenantId: tenant("untrusted"),
        source: "crm",
        sourceAccount: "hostile",
        kinds: ["organizations", "persons", "deals", "leads", "notes"],
        sourceConfig: {
          baseUrl: source.url,
          apiToken: API_TOKEN,
          settings: { pageSize: "50", stripes: "1" },
        },
      });
      const done = await untilFinished(c, run!.id, 45_000);
      expect(done.status).toBe(RunStatus.FAILED);

      // This source ignores updated_since, so the catch-up pass meets the same bad organizations
      // again and notes them again: what matters is which rows failed and why.
      const notes = await c.database.db.execute<{ kind: string; subject_id: string; reason: string }>(sql`
        select kind, subject_id, reason from (
          select distinct kind, subject_id, reason from drover.notes
           where run_id = ${run!.id}::uuid and level = 'error') n
         order by kind, subject_id collate "C"`);
      // A row without a usable id is named by its list and a digest of itself (standInId).
      const noId = (kind: string, raw: unknown) => ({
        kind,
        // As the source serves it: JSON drops an undefined id.
        subject_id: standInId(kind, 0, JSON.parse(JSON.stringify(raw))),
        reason: "the row has no usable id",
      });
      const expected = [
        { kind: "leads", subject_id: "lead-3", reason: "title is not text (got number)" },
        noId("leads", BAD_LEADS[1]),
        { kind: "leads", subject_id: "not-a-uuid-but-ok", reason: "title is not text (got object)" },
        { kind: "notes", subject_id: "77", reason: "content is not text (got number)" },
        { kind: "organizations", subject_id: "4", reason: "name is longer than 1000000 characters" },
        ...[1, 2, 5, 6].map((i) => noId("organizations", BAD_ORGANIZATIONS[i])),
      ].sort((a, b) => (a.kind + a.subject_id < b.kind + b.subject_id ? -1 : 1));
      expect(notes).toEqual(expected);
      const ledger = await c.database.db.execute<{ kind: string; source_id: string; action: string }>(sql`
        select kind, source_id, action from drover.ledger where run_id = ${run!.id}::uuid order by kind, source_id`);
      expect(ledger).toEqual([
        { kind: "organizations", source_id: "1", action: "created" },
        { kind: "organizations", source_id: "5", action: "created" },
      ]);
      const tasks = await c.database.db.execute<{
        kind: string;
        status: string;
        last_error: string | null;
      }>(sql`
        select kind, status, last_error from drover.tasks
         where run_id = ${run!.id}::uuid and seed_key not like 'catch-up:%' -- the main pass's tasks
         order by kind, seed_key`);
      expect(tasks).toEqual([
        {
          kind: "deals",
          status: "failed",
          last_error: expect.stringMatching(
            /\/api\/v2\/deals: response of 41943040 bytes exceeds the 33554432-byte limit/,
          ),
        },
        { kind: "deals", status: "succeeded", last_error: null },
        {
          kind: "leads",
          status: "failed",
          last_error: "every row failed (3); see the run's notes",
        },
        { kind: "leads", status: "succeeded", last_error: null },
        { kind: "notes", status: "succeeded", last_error: null },
        { kind: "organizations", status: "succeeded", last_error: null },
        {
          kind: "persons",
          status: "failed",
          last_error: expect.stringMatching(
            /\/api\/v2\/persons: the source sent a body that is not JSON \(\d+ bytes\)/,
          ),
        },
      ]);
      expect(done.error).toMatch(/task\(s\) failed; first: /);
      // Still alive and well: the same worker imports a good account afterwards.
      expect(worker.state).toBe("RUNNING");
      const next = await c.start(tenant("after-untrusted"), ["organizations"], "after");
      expect((await untilFinished(c, next.id)).status).toBe(RunStatus.SUCCEEDED);
    } finally {
      await worker?.stop();
      await new Promise((r) => source.server.close(r));
    }
  });
  it("from a HubSpot account: a malformed record fails alone with its reason, a list that is not JSON fails its task, the rest lands", async () => {
    const source = await badHubSpot();
    let worker: Worker | undefined;
    try {
      worker = await untrustedWorker("untrusted-hubspot");
      const { run } = await c.client.startRun({
        tenantId: tenant("untrusted-hubspot"),
        source: "hubspot",
        sourceAccount: "hostile-portal",
        kinds: [],
        sourceConfig: { baseUrl: source.url, apiToken: "pat-hostile", settings: {} },
      });
      const done = await untilFinished(c, run!.id, 45_000);
      expect(done.status).toBe(RunStatus.FAILED);
      const notes = await c.database.db.execute<{ kind: string; subject_id: string; reason: string }>(sql`
        select distinct kind, subject_id, reason from drover.notes
         where run_id = ${run!.id}::uuid and level = 'error'`);
      const standIn = expect.stringMatching(/^companies:no-id:[0-9a-f]{16}$/);
      expect(notes).toEqual(
        expect.arrayContaining([
          { kind: "companies", subject_id: "103", reason: "record 103: properties is not an object" },
          { kind: "companies", subject_id: "104", reason: "record 104: property name is not a value" },
          { kind: "companies", subject_id: standIn, reason: "record has no usable id" },
          { kind: "companies", subject_id: standIn, reason: "record is not an object" },
        ]),
      );
      expect(notes.filter((n) => n.kind === "companies")).toHaveLength(5);
      const ledger = await c.database.db.execute<{ kind: string; source_id: string; action: string }>(sql`
        select kind, source_id, action from drover.ledger where run_id = ${run!.id}::uuid order by kind, source_id`);
      expect(ledger).toEqual([
        { kind: "companies", source_id: "101", action: "created" },
        { kind: "companies", source_id: "105", action: "created" },
      ]);
      const failed = await c.database.db.execute<{ kind: string; last_error: string }>(sql`
        select kind, last_error from drover.tasks where run_id = ${run!.id}::uuid and status = 'failed'`);
      expect(failed).toEqual([
        {
          kind: "contacts",
          last_error: expect.stringMatching(
            /\/crm\/v3\/objects\/contacts: the source sent a body that is not JSON/,
          ),
        },
      ]);
      expect(worker.state).toBe("RUNNING");
    } finally {
      await worker?.stop();
      await new Promise((r) => source.server.close(r));
    }
  });
});

const company = (id: unknown, properties: unknown) => ({
  id,
  properties,
  createdAt: "2026-01-02T03:04:05.000Z",
  updatedAt: "2026-01-02T03:04:05.000Z",
  archived: false,
});
const BAD_COMPANIES = [
  company("101", { name: "Good One", hs_lastmodifieddate: "2026-01-02T03:04:05.000Z" }),
  company(undefined, { name: "No Id" }),
  company("103", "not an object"),
  company("104", { name: { nested: true } }),
  company("105", { name: "Good Five", hs_lastmodifieddate: "2026-01-02T03:04:05.000Z" }),
  7,
  null,
];

/**
 * A HubSpot account that answers badly: companies come with a record without an id, one whose
 * properties are not an object, one whose property is an object, a number and a null beside good
 * ones; the contacts list is not JSON; every other list, search and association batch is empty.
 */
function badHubSpot(): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    const path = url.pathname;
    res.setHeader("content-type", "application/json");
    if (path.startsWith("/crm/v3/properties/"))
      return res.end(JSON.stringify({ results: [{ name: "name", hubspotDefined: true }] }));
    if (path === "/crm/v3/objects/companies" && url.searchParams.get("archived") !== "true")
      return res.end(JSON.stringify({ results: BAD_COMPANIES }));
    if (path === "/crm/v3/objects/contacts" && url.searchParams.get("archived") !== "true")
      return res.end('{"results":[{"id":"1","properties":');
    if (req.method === "GET" && /^\/crm\/v3\/objects\/[a-z]+$/.test(path))
      return res.end(JSON.stringify({ results: [] }));
    if (req.method === "POST" && path.endsWith("/search"))
      return res.end(JSON.stringify({ total: 0, results: [] }));
    if (req.method === "POST" && path.startsWith("/crm/v4/associations/"))
      return res.end(JSON.stringify({ results: [] }));
    res.statusCode = 404;
    return res.end(JSON.stringify({ status: "error", message: "not found", category: "OBJECT_NOT_FOUND" }));
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server }),
    ),
  );
}

/**
 * The webhook receiver's bad inputs (services/receiver; its own test has the whole table): a
 * delivery without the run's credential, one that is not a webhooks v2 event and one over the size
 * limit are refused with 401, 400 and 413, and nothing reaches the event stream.
 */
describe("webhook deliveries the receiver refuses", { timeout: 60_000 }, () => {
  it("answers 401, 400 and 413 and stores nothing", async () => {
    const runId = randomUUID();
    await c.database.db.execute(sql`
      insert into drover.runs (id, tenant_id, source, source_account, kinds, plan, source_config, status)
      values (${runId}::uuid, ${tenant("hooks")}, 'crm', 'hooks', '{deals}', '[["deals"]]', '{}', 'running')`);
    await c.database.db.execute(sql`
      insert into drover.run_webhooks (run_id, auth_user, secret_sha256, secret_ciphertext, secret_key_id, mode)
      values (${runId}::uuid, 'u', encode(sha256('p'::bytea), 'hex'), 'x', 'k', 'webhooks')`);
    const receiver = await startReceiver(
      loadReceiverConfig({
        DATABASE_URL: c.testDb.url,
        NATS_URL: process.env.NATS_URL ?? "127.0.0.1:4222",
        DROVER_QUEUE_PREFIX: c.prefix,
        DROVER_RECEIVER_HOST: "127.0.0.1",
        DROVER_RECEIVER_PORT: "0",
        DROVER_RECEIVER_MAX_BODY_BYTES: "2048",
      }),
      createLogger("receiver", { level: "silent" }),
    );
    try {
      const event = (id: string, extra = "") =>
        JSON.stringify({
          meta: { id, action: "change", entity: "deal", entity_id: "1", version: "2.0", extra },
          data: { id: 1 },
          previous: null,
        });
      const post = (body: string, user: string | undefined) =>
        fetch(`${receiver.url}/pipedrive/${runId}`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            ...(user ? { authorization: `Basic ${Buffer.from(user).toString("base64")}` } : {}),
          },
          body,
        });
      const table: [string, () => Promise<Response>, number][] = [
        ["no credential", () => post(event("a"), undefined), 401],
        ["a wrong password", () => post(event("b"), "u:wrong"), 401],
        ["a body that is not JSON", () => post("{", "u:p"), 400],
        ["a v1 event", () => post(event("c").replace('"2.0"', '"1.0"'), "u:p"), 400],
        ["a body over the limit", () => post(event("d", "x".repeat(4096)), "u:p"), 413],
      ];
      for (const [what, send, status] of table) expect((await send()).status, what).toBe(status);
      expect(receiver.receiver.counts.stored).toBe(0);
      // A good one is stored: the table's refusals were not a receiver that stores nothing at all.
      expect((await post(event("e"), "u:p")).status).toBe(200);
      expect(receiver.receiver.counts.stored).toBe(1);
    } finally {
      await receiver.stop();
    }
  });
});
