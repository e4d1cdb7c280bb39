import { randomBytes } from "node:crypto";
import { parseArgs } from "node:util";
import { statusName, table, verificationTable } from "@drover/cli";
import { openDatabase } from "@drover/db";
import {
  type Cluster,
  createSourceDatabase,
  EMPTY_CRM_SANDBOX,
  generateRoomEvents,
  startCluster,
} from "@drover/local-cluster";
import { type Client, createClient, type Run, RunService, RunStatus } from "@drover/proto";
import { ulidFloor } from "@drover/source-pg-table";
import { sql } from "drizzle-orm";
import { prepareDemoServices } from "./prepare.js";
import { followRun, ProgressView } from "./progress.js";

const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/drover_demo";
const NATS_URL = process.env.NATS_URL ?? "127.0.0.1:4222";
const HOUR = 3_600_000;

export const USAGE = `usage: pnpm demo:table [--rows 100000] [--hours 48] [--slot-width 1h] [--workers 2] [--lane 4]
                       [--tenant demo-table] [--keep-source]

Copies a generated room_events table (ULID id, room id, JSON payloads of 0.5-2 KB) from a second
database on the same server into app.room_events with the pg-table source: one coordinator and the
workers as separate processes, StartRun over gRPC, live progress, then per-slot totals and the
verification (per-slot counts and a sample of rows per slot compared field by field). Exits non-zero
on any mismatch. The source database is dropped at the end unless --keep-source.
Environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/drover_demo), NATS_URL (127.0.0.1:4222).`;

function flags(argv: string[]) {
  const { values } = parseArgs({
    args: argv.filter((a) => a !== "--"),
    options: {
      rows: { type: "string", default: "100000" },
      hours: { type: "string", default: "48" },
      "slot-width": { type: "string", default: "1h" },
      workers: { type: "string", default: "2" },
      lane: { type: "string", default: "4" },
      tenant: { type: "string", default: "demo-table" },
      "keep-source": { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const int = (name: string, v: string, max: number) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1 || n > max)
      throw new Error(`--${name} must be an integer from 1 to ${max}`);
    return n;
  };
  return {
    rows: int("rows", values.rows, 100_000_000),
    hours: int("hours", values.hours, 24 * 366),
    slotWidth: values["slot-width"],
    workers: int("workers", values.workers, 32),
    lane: int("lane", values.lane, 64),
    tenant: values.tenant,
    keepSource: values["keep-source"],
  };
}

type TableFlags = ReturnType<typeof flags>;
type SourceDatabase = Awaited<ReturnType<typeof createSourceDatabase>>;
type DemoClient = Client<typeof RunService>;

/** The time the source rows span: whole hours, in epoch milliseconds. */
interface EventSpan {
  from: number;
  to: number;
}

async function main(): Promise<number> {
  let f: TableFlags;
  try {
    f = flags(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  if (!(await prepareDemoServices(DATABASE_URL, NATS_URL))) return 1;

  // Whole hours, ending at the last full hour: the newest slot is the one copied first.
  const to = Math.floor(Date.now() / HOUR) * HOUR;
  const span = { from: to - f.hours * HOUR, to };
  const source = await createSourceDatabase(DATABASE_URL, "drover_demo_source");
  const database = openDatabase(DATABASE_URL, { max: 2 });
  let cluster: Awaited<ReturnType<typeof startCluster>> | undefined;
  try {
    const sourceRows = await generateSource(source, f, span);
    // The tenant's earlier demo copies would count as unexpected rows in the same slots.
    await database.db.execute(sql`delete from app.room_events where tenant_id = ${f.tenant}`);

    cluster = await startTableCluster(f);
    const running = cluster;
    const client = createClient(RunService, running.coordinatorAddresses[0]!, {
      metadata: () => ({ authorization: `Bearer ${running.adminToken}` }),
    });
    const onSignal = () => {
      process.stdout.write("\ninterrupted: stopping the services\n");
      void running.stop().then(() => process.exit(130));
    };
    process.once("SIGINT", onSignal);
    try {
      const last = await copyRoomEvents(client, source, f, span, sourceRows);
      return await verifyCopy(client, database, source, last);
    } finally {
      process.off("SIGINT", onSignal);
      client.close();
    }
  } finally {
    await cluster?.stop();
    await database.close();
    if (f.keepSource) {
      await source.sql.end({ timeout: 5 });
      process.stdout.write(`Source kept: ${source.url}\n`);
    } else await source.drop();
  }
}

/** Fills the source database's room_events over the span. Returns how many rows it holds. */
async function generateSource(source: SourceDatabase, f: TableFlags, span: EventSpan): Promise<string> {
  process.stdout.write(`Generating ${f.rows} room events over ${f.hours} h in database ${source.name}\n`);
  const t0 = Date.now();
  await generateRoomEvents(source.sql, {
    rows: f.rows,
    from: new Date(span.from),
    to: new Date(span.to),
    onProgress: (done, total) => {
      if (process.stdout.isTTY) process.stdout.write(`\r  ${done}/${total}`);
    },
  });
  const [size] = await source.sql<{ size: string; n: string }[]>`
    select pg_size_pretty(pg_total_relation_size('public.room_events')) as size, count(*)::text as n from public.room_events`;
  process.stdout.write(
    `${process.stdout.isTTY ? "\n" : ""}  ${size!.n} rows, ${size!.size}, in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`,
  );
  return size!.n;
}

/** One coordinator and the workers; the CRM sandbox starts with every cluster, empty here. */
async function startTableCluster(f: TableFlags): Promise<Cluster> {
  const queuePrefix = `demo-table-${randomBytes(3).toString("hex")}`;
  process.stdout.write(
    `Starting 1 coordinator and ${f.workers} workers (logs in .artifacts/logs/${queuePrefix}/)\n`,
  );
  return startCluster({
    databaseUrl: DATABASE_URL,
    natsUrl: NATS_URL,
    queuePrefix,
    workers: f.workers,
    laneWidth: f.lane,
    sandbox: { ...EMPTY_CRM_SANDBOX },
    env: { DROVER_SWEEP_INTERVAL_MS: "1000" },
  });
}

/** Starts the pg-table run over gRPC and follows it to its end. Returns the run as it ended. */
async function copyRoomEvents(
  client: DemoClient,
  source: SourceDatabase,
  f: TableFlags,
  span: EventSpan,
  sourceRows: string,
): Promise<Run> {
  const started = Date.now();
  const { run } = await client.startRun({
    tenantId: f.tenant,
    source: "pg-table",
    sourceAccount: source.name,
    // The connection string is the run's secret: sealed by the coordinator, opened by workers only.
    sourceConfig: {
      baseUrl: "",
      apiToken: source.url,
      settings: {
        table: "public.room_events",
        destination: "app.room_events",
        tenantColumn: "tenant_id",
        mapping: "id=id,room_id=room_id,data=data",
        from: new Date(span.from).toISOString(),
        to: new Date(span.to).toISOString(),
        slotWidth: f.slotWidth,
      },
    },
  });
  process.stdout.write(`StartRun: run ${run!.id} for tenant "${f.tenant}", ${sourceRows} source rows\n`);
  return followRun(client, run!, new ProgressView({ rows: Number(sourceRows) }), started);
}

/** Prints the per-slot totals and the run's verification. Returns the exit code: 0 only if both hold. */
async function verifyCopy(
  client: DemoClient,
  database: ReturnType<typeof openDatabase>,
  source: SourceDatabase,
  last: Run,
): Promise<number> {
  process.stdout.write(`${await slotTable(database, source.sql, last.id)}\n\n`);

  const { verification } = await client.verifyRun({ runId: last.id });
  const v = verification!;
  process.stdout.write(`${verificationTable(v, "destination")}\n`);
  if (v.error) process.stdout.write(`verification error: ${v.error}\n`);
  const ok = v.ok && last.status === RunStatus.SUCCEEDED;
  process.stdout.write(
    ok
      ? `\nVerified: every slot holds as many rows in app.room_events as in the source, and every sampled row matches field by field.\n`
      : `\nVERIFICATION FAILED${last.status === RunStatus.SUCCEEDED ? "" : ` (the run ended ${statusName(last.status)})`}\n`,
  );
  return ok ? 0 : 1;
}

/** Per-slot totals: the source's rows in the slot's bounds, and what its task read and wrote. */
async function slotTable(
  database: ReturnType<typeof openDatabase>,
  source: SourceDatabase["sql"],
  runId: string,
): Promise<string> {
  const tasks = await database.db.execute<{
    cursor: { from: number; to: number };
    status: string;
    attempts: number;
    rows_read: string;
    rows_written: string;
  }>(sql`select cursor, status, attempts, rows_read::text, rows_written::text from drover.tasks
          where run_id = ${runId}::uuid order by (cursor ->> 'from')::bigint desc`);
  const rows: string[][] = [];
  const totals = { source: 0, read: 0, written: 0 };
  for (const t of tasks) {
    const [c] = await source<{ n: string }[]>`
      select count(*)::text as n from public.room_events where id >= ${ulidFloor(t.cursor.from)} and id < ${ulidFloor(t.cursor.to)}`;
    const n = Number(c!.n);
    totals.source += n;
    totals.read += Number(t.rows_read);
    totals.written += Number(t.rows_written);
    rows.push([
      new Date(t.cursor.from).toISOString().slice(0, 16).replace("T", " "),
      t.status,
      String(t.attempts),
      String(n),
      t.rows_read,
      t.rows_written,
      n === Number(t.rows_written) ? "" : "≠",
    ]);
  }
  rows.push(["total", "", "", String(totals.source), String(totals.read), String(totals.written), ""]);
  return table(["slot (UTC)", "status", "attempts", "source rows", "read", "written", ""], rows);
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`demo:table failed: ${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
