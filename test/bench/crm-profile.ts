import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openDatabase } from "@drover/db";
import { crmEngineSandbox, phaseTimes } from "./crm-engine.js";
import { API_TOKEN, openBenchCluster, untilVerified } from "./harness.js";
import { plainCrmImport } from "./plain-crm-import.js";
import { backendMeter, TICK, ticks } from "./process-cpu.js";

/**
 * Where the crm path's time goes (crm_engine's workload: the demo's account, no latency, no
 * limits, 2 workers x lane 4), measured so that a loaded machine does not skew it: CPU seconds
 * (utime + stime from /proc) per 1,000 rows of the workers, the coordinator, the sandbox and the
 * Postgres backends (per application_name), for the engine's run and for the plain loop over the
 * same account; and, given the server's log file (PROFILE_SERVER_LOG; the database is set to
 * log_statement = all before the workers start), statements per 1,000 rows by their first words.
 * PROFILE_CPU_DIR writes each worker's V8 CPU profile there (node --cpu-prof), to open in Chrome's
 * DevTools or read with a script. PROFILE_SCALE takes a share of the account (default 1), PROFILE_SETTINGS sets crm settings.
 *
 *   cd test && PROFILE_SERVER_LOG=/var/log/postgresql/postgresql-15-main.log \
 *     PROFILE_CPU_DIR=/tmp/crm-prof node --import tsx --conditions=@drover/source bench/crm-profile.ts
 */

const LOG = process.env.PROFILE_SERVER_LOG || undefined;
const CPU_DIR = process.env.PROFILE_CPU_DIR || undefined;
const SCALE = Number(process.env.PROFILE_SCALE ?? 1);
/** crm settings for the run (JSON, e.g. '{"dealsPerMailTask":"50"}'); the defaults when absent. */
const SETTINGS = JSON.parse(process.env.PROFILE_SETTINGS ?? "{}") as Record<string, string>;
/** One database's backend CPU as this report gives it: `all`, then per application_name. */
function byApp(by: Record<string, number>, db: string): Record<string, number> {
  return Object.fromEntries(
    Object.entries(by).map(([k, v]) => [k === db ? "all" : k.slice(db.length + 1), v]),
  );
}

function logOffset(): number {
  return LOG ? statSync(LOG).size : 0;
}

/** Statements the server logged for `db` since `from`, grouped by their first words. */
function statements(from: number, db: string): { total: number; kinds: Record<string, number> } {
  if (!LOG) return { total: 0, kinds: {} };
  const text = readFileSync(LOG).subarray(from).toString("utf8");
  const kinds: Record<string, number> = {};
  let total = 0;
  // A statement of several lines continues on lines without the log's prefix.
  for (const entry of text.split(/\n(?=\d{4}-\d\d-\d\d \d\d:)/)) {
    if (!entry.includes(`@${db} `)) continue;
    const m = /LOG: {2}(?:statement|execute [^:]*): ([\s\S]*)$/.exec(entry);
    if (!m) continue;
    total++;
    const words = m[1]!.trim().replace(/\s+/g, " ").split(" ").slice(0, 5).join(" ").slice(0, 60);
    kinds[words] = (kinds[words] ?? 0) + 1;
  }
  return { total, kinds: Object.fromEntries(Object.entries(kinds).sort((a, b) => b[1] - a[1])) };
}

const per1k = (x: number, rows: number) => Number(((x * 1000) / rows).toFixed(3));

async function main() {
  const sandbox = crmEngineSandbox({ quick: SCALE < 1, scale: SCALE });
  const bench = await openBenchCluster({
    name: "crm-profile",
    workers: 0,
    laneWidth: 4,
    sandbox,
    env: { DROVER_SWEEP_INTERVAL_MS: "1000" },
  });
  const adminDb = openDatabase(bench.testDb.url, { max: 1, applicationName: "profile-admin" });
  const admin = adminDb.sql;
  try {
    if (LOG) await admin.unsafe(`alter database "${bench.testDb.name}" set log_statement = 'all'`);
    // Workers start after the setting, so their connections log; under a launcher that adds --cpu-prof.
    let launcher: string[] | undefined;
    if (CPU_DIR) {
      mkdirSync(CPU_DIR, { recursive: true });
      const script = join(CPU_DIR, "cpu-prof-launcher.sh");
      writeFileSync(
        script,
        `#!/bin/sh\nnode="$1"; shift\nexec "$node" --cpu-prof --cpu-prof-dir="${CPU_DIR}" "$@"\n`,
      );
      chmodSync(script, 0o755);
      launcher = [script];
    }
    const workers = [
      await bench.cluster.addWorker(launcher ? { launcher } : {}),
      await bench.cluster.addWorker(launcher ? { launcher } : {}),
    ];
    const others = { coordinator: bench.cluster.coordinators, sandbox: [bench.cluster.sandbox] };

    let meter = backendMeter(admin, [bench.testDb.name]);
    await meter.started;
    let offset = logOffset();
    const w0 = workers.map((w) => ticks(w.pid) ?? 0);
    const o0 = Object.fromEntries(
      Object.entries(others).map(([k, ps]) => [k, ps.map((p) => ticks(p.pid) ?? 0)]),
    );
    const outcome = await bench.runToEnd(
      {
        tenantId: "prof",
        sourceAccount: "prof",
        kinds: ["organizations", "persons", "deals", "leads", "activities", "notes", "mail"],
        settings: SETTINGS,
      },
      1_800_000,
    );
    const cpu: Record<string, number> = {
      workers: workers.reduce((s, w, i) => s + ((ticks(w.pid) ?? 0) - w0[i]!) / TICK, 0),
    };
    for (const [k, ps] of Object.entries(others))
      cpu[k] = ps.reduce((s, p, i) => s + ((ticks(p.pid) ?? 0) - o0[k]![i]!) / TICK, 0);
    const backends = byApp(await meter.stop(), bench.testDb.name);
    const engineStatements = statements(offset, bench.testDb.name);
    const rows = outcome.run.progress.reduce(
      (n, p) => n + Number(p.imported + p.matched + p.alreadyHere + p.skipped + p.failed),
      0,
    );
    const phases = await phaseTimes(bench.database.sql, outcome.run.id);
    await untilVerified(bench.database.sql, outcome.run.id);
    await bench.stopEngine();

    meter = backendMeter(admin, [bench.testDb.name]);
    await meter.started;
    offset = logOffset();
    const s0 = ticks(bench.cluster.sandbox.pid) ?? 0;
    const cpu0 = process.cpuUsage();
    const plain = await plainCrmImport(bench.database, {
      sandboxUrl: bench.cluster.sandboxUrl,
      apiToken: API_TOKEN,
      tenantId: "prof-plain",
    });
    const plainCpu = process.cpuUsage(cpu0);
    const plainSandbox = ((ticks(bench.cluster.sandbox.pid) ?? 0) - s0) / TICK;
    const plainBackends = byApp(await meter.stop(), bench.testDb.name);
    const plainStatements = statements(offset, bench.testDb.name);

    const report = {
      rows,
      engine: {
        seconds: (outcome.finishedAt - outcome.startedAt) / 1000,
        phases,
        cpuSeconds: cpu,
        cpuPer1k: {
          ...Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, per1k(v, rows)])),
          backends: Object.fromEntries(Object.entries(backends).map(([k, v]) => [k, per1k(v, rows)])),
        },
        statementsPer1k: per1k(engineStatements.total, rows),
        statements: engineStatements,
      },
      plain: {
        seconds: plain.seconds,
        cpuPer1k: {
          node: per1k((plainCpu.user + plainCpu.system) / 1e6, rows),
          sandbox: per1k(plainSandbox, rows),
          backends: Object.fromEntries(Object.entries(plainBackends).map(([k, v]) => [k, per1k(v, rows)])),
        },
        statementsPer1k: per1k(plainStatements.total, rows),
        statements: plainStatements,
      },
    };
    console.log(JSON.stringify(report, null, 2));
  } finally {
    if (LOG) await admin.unsafe(`alter database "${bench.testDb.name}" reset log_statement`).catch(() => {});
    await adminDb.close();
    await bench.close();
  }
}

await main();
