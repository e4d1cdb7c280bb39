import { type Database, openDatabase } from "@drover/db";
import { createTestDatabase } from "@drover/db/testing";
import { claimLedgerSlots, type LedgerSlotClaim } from "@drover/ledger";
import { DATABASE_URL } from "./harness.js";
import type { Scenario, ScenarioResult } from "./scenario.js";

/**
 * How a window's ledger claim grows with the ledger: the same windows (500 new slots each, one
 * transaction each, through the engine's claimLedgerSlots) on a ledger of 200 thousand rows and on
 * one of 20 million, each in a database of its own, the windows alternating between the two so that
 * load from elsewhere on the machine falls on both alike. The ledgers are filled with generate_series,
 * tenant by tenant (as runs write it: a run's slots arrive together), 2,000 rows per tenant across
 * four kinds. `quick` claims on 20 thousand and 600 thousand rows (BENCH_LEDGER_ROWS=small,large
 * sets both): filling a tenth of the large ledger, 2 million rows, took most of a minute of the quick
 * bench's three, and 30 times the rows still shows how a claim grows once the ledger outgrows
 * shared_buffers (600 thousand rows are ~150 MB, over the default 128 MB).
 */
export interface LedgerGrowthSizes {
  small: number;
  large: number;
}

const FULL: LedgerGrowthSizes = { small: 200_000, large: 20_000_000 };
const QUICK: LedgerGrowthSizes = { small: 20_000, large: 600_000 };
const ROWS_PER_TENANT = 2_000;
const WINDOW_ROWS = 500;
const WARMUP_WINDOWS = 10;
const TIMED_WINDOWS = 100;
/** Rows per INSERT … SELECT while filling: one statement per million keeps each transaction's WAL bounded. */
const FILL_CHUNK = 1_000_000;

export function ledgerGrowthSizes(quick: boolean, env: NodeJS.ProcessEnv = process.env): LedgerGrowthSizes {
  const raw = env.BENCH_LEDGER_ROWS?.trim();
  if (raw) {
    const [small, large] = raw.split(",").map((v) => Number(v.trim()));
    if (!Number.isInteger(small) || !Number.isInteger(large) || small! < ROWS_PER_TENANT || large! <= small!)
      throw new Error(
        `BENCH_LEDGER_ROWS must be "small,large", two whole numbers with ${ROWS_PER_TENANT} <= small < large (got "${raw}")`,
      );
    return { small: small!, large: large! };
  }
  return quick ? QUICK : FULL;
}

const log = (line: string) => process.stderr.write(`[bench] ledger_growth: ${line}\n`);

/**
 * Runs `fill` with the ledger's secondary indexes dropped, then builds them again from their own
 * definitions (one sort instead of 20 million index insertions: minutes less); then VACUUM ANALYZE
 * and a CHECKPOINT, so that the timed work pays neither for the fill's write-back nor for its
 * first full-page writes. ledger_close fills its closed account the same way.
 */
export async function fillWithoutIndexes(database: Database, fill: () => Promise<void>): Promise<void> {
  const indexes = await database.sql<{ name: string; definition: string }[]>`
    select indexname as name, indexdef as definition from pg_indexes
     where schemaname = 'drover' and tablename = 'ledger' and indexname <> 'ledger_pkey'`;
  for (const index of indexes) await database.sql.unsafe(`drop index drover."${index.name}"`);
  await fill();
  await database.sql.unsafe("set maintenance_work_mem = '256MB'");
  for (const index of indexes) await database.sql.unsafe(index.definition);
  await database.sql.unsafe("vacuum analyze drover.ledger");
  await database.sql.unsafe("checkpoint");
}

/** Fills the ledger with `rows` rows, as finished runs would have left them. */
async function fillLedger(database: Database, rows: number): Promise<void> {
  await fillWithoutIndexes(database, async () => {
    for (let start = 0; start < rows; start += FILL_CHUNK) {
      const end = Math.min(rows, start + FILL_CHUNK);
      await database.sql.unsafe(
        `insert into drover.ledger
           (tenant_id, source, source_account, kind, source_id, action, record_type, record_id, run_id, task_id)
         select 'tenant-' || (g / ${ROWS_PER_TENANT}), 'crm', 'account-' || (g / ${ROWS_PER_TENANT}),
                (array['organizations','persons','deals','activities'])[g % 4 + 1],
                (g % ${ROWS_PER_TENANT} / 4)::text, 'created', 'record', g,
                md5('run-' || (g / ${ROWS_PER_TENANT}))::uuid, g / ${WINDOW_ROWS}
           from generate_series($1::bigint, $2::bigint - 1) g`,
        [start, end],
      );
    }
  });
}

/**
 * Claims WARMUP + TIMED windows of a fresh tenant in each database, alternating, and returns the
 * milliseconds of the timed ones per database.
 */
async function timeWindowClaims(databases: readonly Database[]): Promise<number[][]> {
  const times: number[][] = databases.map(() => []);
  const runId = crypto.randomUUID();
  const tenantId = "measured-tenant";
  for (let w = 0; w < WARMUP_WINDOWS + TIMED_WINDOWS; w++) {
    const claims: LedgerSlotClaim[] = Array.from({ length: WINDOW_ROWS }, (_, i) => ({
      kind: "persons",
      sourceId: String(w * WINDOW_ROWS + i),
      action: "created",
      recordType: "contact",
      recordId: w * WINDOW_ROWS + i,
    }));
    for (const [d, database] of databases.entries()) {
      const t0 = performance.now();
      const owned = await database.db.transaction((tx) =>
        claimLedgerSlots(tx, { tenantId, source: "crm", sourceAccount: tenantId, runId, taskId: w }, claims),
      );
      const ms = performance.now() - t0;
      if (owned.size !== WINDOW_ROWS)
        throw new Error(`window ${w} owned ${owned.size} of ${WINDOW_ROWS} slots`);
      if (w >= WARMUP_WINDOWS) times[d]!.push(ms);
    }
  }
  return times;
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

async function ledgerFootprint(database: Database) {
  const [row] = await database.sql<
    { rows: string; total_bytes: string; heap_bytes: string; index_bytes: string; avg_row_bytes: string }[]
  >`select (select count(*) from drover.ledger) as rows,
           pg_total_relation_size('drover.ledger') as total_bytes,
           pg_relation_size('drover.ledger') as heap_bytes,
           pg_indexes_size('drover.ledger') as index_bytes,
           (select avg(pg_column_size(l.*)) from drover.ledger l tablesample system (1)) as avg_row_bytes`;
  return {
    rows: Number(row!.rows),
    totalBytes: Number(row!.total_bytes),
    heapBytes: Number(row!.heap_bytes),
    indexBytes: Number(row!.index_bytes),
    avgRowBytes: Number(row!.avg_row_bytes),
  };
}

export const ledgerGrowthScenario: Scenario = {
  name: "ledger_growth",
  selects: ["ledger_claim_growth", "ledger_bytes_per_row"],
  async run(context?: { quick?: boolean }): Promise<ScenarioResult> {
    const sizes = ledgerGrowthSizes(context?.quick ?? false);
    const testDbs = [await createTestDatabase(DATABASE_URL), await createTestDatabase(DATABASE_URL)];
    const databases = testDbs.map((t) =>
      openDatabase(t.url, { max: 1, applicationName: "bench-ledger-growth" }),
    );
    try {
      const fillSeconds: number[] = [];
      for (const [d, rows] of [sizes.small, sizes.large].entries()) {
        const t0 = performance.now();
        await fillLedger(databases[d]!, rows);
        fillSeconds.push((performance.now() - t0) / 1000);
        log(`${rows} rows in ${fillSeconds[d]!.toFixed(1)} s`);
      }
      const [small, large] = await timeWindowClaims(databases);
      const [smallFootprint, largeFootprint] = await Promise.all(databases.map(ledgerFootprint));
      const smallMs = median(small!);
      const largeMs = median(large!);
      return {
        figures: {
          ledger_claim_growth: largeMs / smallMs,
          ledger_bytes_per_row: largeFootprint!.totalBytes / largeFootprint!.rows,
        },
        settings: {
          sizes,
          rowsPerTenant: ROWS_PER_TENANT,
          windowRows: WINDOW_ROWS,
          warmupWindows: WARMUP_WINDOWS,
          timedWindows: TIMED_WINDOWS,
        },
        details: {
          smallMedianMs: smallMs,
          largeMedianMs: largeMs,
          smallP90Ms: percentile(small!, 0.9),
          largeP90Ms: percentile(large!, 0.9),
          fillSeconds,
          smallFootprint,
          largeFootprint,
        },
      };
    } finally {
      await Promise.all(databases.map((d) => d.close()));
      await Promise.all(testDbs.map((t) => t.drop()));
    }
  },
};
