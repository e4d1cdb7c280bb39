import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { type ChaosReport, EXACT, runChaos } from "./scenario.js";
import { SOAK, SOAK_FOLLOW, SOAK_FOLLOW_WEBHOOKS } from "./schedules.js";

/** CHAOS_SOAK_MS, set by `pnpm test:chaos -- --soak 30m` (cli.mjs): how long to keep the faults coming. */
const soakMs = Number(process.env.CHAOS_SOAK_MS ?? 0);
const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));

describe("chaos, soak", () => {
  it.skipIf(!(soakMs > 0))(
    "run after run under faults until the time is spent: nothing lost, duplicated or unexpected in any",
    async () => {
      const started = Date.now();
      const reports: ChaosReport[] = [];
      // A run is started only while it can still finish inside the time (a small run takes ~1 min).
      while (Date.now() - started < soakMs) {
        const seed = Math.floor(Math.random() * 0xffffffff);
        // Fresh runs, follow runs that poll and follow runs fed by webhooks in turn: a follow run
        // meets the faults while the source changes.
        const schedule = [SOAK, SOAK_FOLLOW, SOAK_FOLLOW_WEBHOOKS][reports.length % 3]!;
        reports.push(await runChaos({ ...schedule, seed }));
      }
      const sum = (f: (r: ChaosReport) => number) => reports.reduce((n, r) => n + f(r), 0);
      const figures = {
        minutes: Math.round((Date.now() - started) / 600) / 100,
        runs: reports.length,
        followRuns: reports.filter((r) => r.options.follow).length,
        rows: sum((r) => r.sourceRows),
        faults: sum((r) => r.faults.length),
        faultsByKind: Object.fromEntries(
          Object.keys(reports[0]?.faultCounts ?? {}).map((k) => [
            k,
            sum((r) => r.faultCounts[k as keyof ChaosReport["faultCounts"]]),
          ]),
        ),
        lost: sum((r) => r.checks.lost),
        duplicated: sum((r) => r.checks.duplicated),
        failedRuns: reports.filter((r) => !r.passed).map((r) => r.seed),
      };
      const dir = join(REPO_ROOT, ".artifacts", "chaos");
      mkdirSync(dir, { recursive: true });
      const file = join(dir, `soak-${new Date(started).toISOString().replace(/[:.]/g, "-")}.json`);
      writeFileSync(file, `${JSON.stringify({ figures, seeds: reports.map((r) => r.seed) }, null, 2)}\n`);
      console.log(`soak: ${JSON.stringify(figures)}; ${file}`);
      expect(reports.length).toBeGreaterThan(0);
      for (const r of reports) {
        expect(r.problems, `seed ${r.seed}`).toEqual([]);
        expect(r.checks, `seed ${r.seed}`).toMatchObject(EXACT);
      }
    },
    // Its own time, the last run's (up to its 100 s deadline and verification), and teardown.
    Math.max(soakMs, 0) + 600_000,
  );
});
