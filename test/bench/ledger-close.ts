import { type Database, openDatabase } from "@drover/db";
import { createTestDatabase } from "@drover/db/testing";
import { closeMigration, removeClosedLedgers } from "@drover/engine";
import { claimLedgerSlots, type LedgerSlotClaim } from "@drover/ledger";
import { DATABASE_URL } from "./harness.js";
import { fillWithoutIndexes } from "./ledger-growth.js";
import type { Scenario, ScenarioResult } from "./scenario.js";

/**
 * What removing a closed migration's ledger costs the runs still writing (issue 38): a live tenant's
 * windows (500 new slots each, one transaction each, through the engine's claimLedgerSlots, as in
 * ledger_growth, one every WINDOW_EVERY_MS as a busy run's lane commits them) timed before, during
 * and after the leader removes another account's 20 million rows the way its reaper does: a pass
 * every 2 s (DROVER_REAPER_INTERVAL_MS's default) spending half a second of 5,000-row statements
 * (removeClosedLedgers' defaults), until every row is gone. `quick`: 600 thousand rows.
 *
 * `ledger_close_window_slowdown`: median window time during the removal ÷ before and after it
 * (goal ≤ 1.10: a close must not cost live runs more than 10 %; past it, the issue asks for a ledger
 * partitioned by tenant so a close is a partition-local delete). `ledger_close_rows_per_s`: rows
 * removed per second of the whole removal (report-only: how long a backlog of closes takes).
 */
const FULL_ROWS = 20_000_000;
const QUICK_ROWS = 600_000;
const WINDOW_ROWS = 500;
const WARMUP_WINDOWS = 10;
/** Timed windows before the removal starts, and again after it ends. */
const QUIET_WINDOWS = 100;
/** A window started this often (at most): a busy run's lane. */
const WINDOW_EVERY_MS = 50;
/** The leader's reaper pass (DROVER_REAPER_INTERVAL_MS's default) and its removal budget in it. */
const REAPER_INTERVAL_MS = 2_000;
const REMOVAL_BUDGET_MS = 500;
const FILL_CHUNK = 1_000_000;
const CLOSED = { tenantId: "closed-tenant", source: "crm", sourceAccount: "closed-account" };

const log = (line: string) => process.stderr.write(`[bench] ledger_close: ${line}\n`);

/** The closed account's rows, filled as ledger_growth fills its ledger (indexes rebuilt after). */
async function fillClosedAccount(database: Database, rows: number): Promise<void> {
  await fillWithoutIndexes(database, async () => {
    for (let start = 0; start < rows; start += FILL_CHUNK) {
      const end = Math.min(rows, start + FILL_CHUNK);
      await database.sql.unsafe(
        `insert into drover.ledger
           (tenant_id, source, source_account, kind, source_id, action, record_type, record_id, run_id, task_id)
         select $3, $4, $5, (array['organizations','persons','deals','activities'])[g % 4 + 1],
                g::text, 'created', 'record', g, md5('run-' || (g / 100000))::uuid, g / ${WINDOW_ROWS}
           from generate_series($1::bigint, $2::bigint - 1) g`,
        [start, end, CLOSED.tenantId, CLOSED.source, CLOSED.sourceAccount],
      );
    }
  });
}

/** One live window: 500 new slots of the live tenant, in one transaction. */
async function claimWindow(database: Database, w: number, runId: string): Promise<number> {
  const claims: LedgerSlotClaim[] = Array.from({ length: WINDOW_ROWS }, (_, i) => ({
    kind: "persons",
    sourceId: String(w * WINDOW_ROWS + i),
    action: "created",
    recordType: "contact",
    recordId: w * WINDOW_ROWS + i,
  }));
  const t0 = performance.now();
  const owned = await database.db.transaction((tx) =>
    claimLedgerSlots(
      tx,
      { tenantId: "live-tenant", source: "crm", sourceAccount: "live-account", runId, taskId: w },
      claims,
    ),
  );
  if (owned.size !== WINDOW_ROWS) throw new Error(`window ${w} owned ${owned.size} of ${WINDOW_ROWS} slots`);
  return performance.now() - t0;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
}

export const ledgerCloseScenario: Scenario = {
  name: "ledger_close",
  selects: ["ledger_close_window_slowdown", "ledger_close_rows_per_s"],
  async run(context?: { quick?: boolean }): Promise<ScenarioResult> {
    const rows = context?.quick ? QUICK_ROWS : FULL_ROWS;
    const testDb = await createTestDatabase(DATABASE_URL);
    const live = openDatabase(testDb.url, { max: 1, applicationName: "bench-ledger-close-live" });
    const leader = openDatabase(testDb.url, { max: 2, applicationName: "bench-ledger-close-leader" });
    try {
      const t0 = performance.now();
      await fillClosedAccount(live, rows);
      const fillSeconds = (performance.now() - t0) / 1000;
      log(`${rows} rows of the closed account in ${fillSeconds.toFixed(1)} s`);
      await closeMigration(leader.db, CLOSED, 0);

      const runId = crypto.randomUUID();
      let w = 0;
      const paced = async (into: number[]) => {
        const started = performance.now();
        into.push(await claimWindow(live, w++, runId));
        const left = WINDOW_EVERY_MS - (performance.now() - started);
        if (left > 0) await new Promise((r) => setTimeout(r, left));
      };
      const warmup: number[] = [];
      while (w < WARMUP_WINDOWS) await paced(warmup);
      const quiet: number[] = [];
      for (let i = 0; i < QUIET_WINDOWS; i++) await paced(quiet);
      // The leader's removal, pass after pass, until the closed account has no row left.
      let removed = 0;
      let done = false;
      const removalStarted = performance.now();
      const removal = (async () => {
        for (;;) {
          const passStarted = performance.now();
          const n = await removeClosedLedgers(leader.db, { budgetMs: REMOVAL_BUDGET_MS });
          removed += n;
          if (n === 0) break;
          const rest = REAPER_INTERVAL_MS - (performance.now() - passStarted);
          if (rest > 0) await new Promise((r) => setTimeout(r, rest));
        }
        done = true;
      })();
      const removing: number[] = [];
      while (!done) await paced(removing);
      await removal;
      const removalSeconds = (performance.now() - removalStarted) / 1000;
      for (let i = 0; i < QUIET_WINDOWS; i++) await paced(quiet);
      const slowdown = median(removing) / median(quiet);
      log(
        `quiet median ${median(quiet).toFixed(1)} ms, removing ${median(removing).toFixed(1)} ms (${removing.length} windows); removed ${removed} rows in ${removalSeconds.toFixed(1)} s`,
      );
      return {
        figures: {
          ledger_close_window_slowdown: slowdown,
          ledger_close_rows_per_s: removed / removalSeconds,
        },
        settings: {
          rows,
          windowRows: WINDOW_ROWS,
          windowEveryMs: WINDOW_EVERY_MS,
          reaperIntervalMs: REAPER_INTERVAL_MS,
          removalBudgetMs: REMOVAL_BUDGET_MS,
        },
        details: {
          quietMedianMs: median(quiet),
          removingMedianMs: median(removing),
          quietP90Ms: percentile(quiet, 0.9),
          removingP90Ms: percentile(removing, 0.9),
          removedRows: removed,
          removingWindows: removing.length,
          removalSeconds,
          fillSeconds,
        },
      };
    } finally {
      await live.close();
      await leader.close();
      await testDb.drop();
    }
  },
};
