import { readdirSync, readFileSync } from "node:fs";
import type { Database } from "@drover/db";

/** /proc/<pid>/stat counts CPU time in clock ticks of 1/100 s (USER_HZ). */
export const TICK = 100;

/** A process's CPU time so far (user + system), in ticks; undefined once it is gone. */
export function ticks(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return undefined;
  }
}

/**
 * CPU seconds of every backend of the given databases between start and stop, sampled every 100 ms
 * so that pool and short-lived connections are seen too: by database (`<db>`) and by database and
 * application_name (`<db>/<app>`).
 */
export function backendMeter(admin: Database["sql"], databases: string[]) {
  const first = new Map<number, { db: string; app: string; at: number }>();
  const last = new Map<number, number>();
  let stopped = false;
  const sample = async (initial: boolean) => {
    const rows = await admin<{ pid: number; datname: string; app: string }[]>`
      select pid, datname, application_name as app from pg_stat_activity
       where datname = any(${databases}) and pid <> pg_backend_pid()`;
    for (const r of rows) {
      const t = ticks(r.pid);
      if (t === undefined) continue;
      if (!first.has(r.pid)) first.set(r.pid, { db: r.datname, app: r.app, at: initial ? t : 0 });
      last.set(r.pid, t);
    }
  };
  const started = sample(true);
  const loop = (async () => {
    await started;
    while (!stopped) {
      await new Promise((r) => setTimeout(r, 100));
      await sample(false);
    }
  })();
  return {
    started,
    async stop(): Promise<Record<string, number>> {
      await sample(false);
      stopped = true;
      await loop;
      const by: Record<string, number> = {};
      for (const [pid, f] of first) {
        const used = ((last.get(pid) ?? f.at) - f.at) / TICK;
        by[f.db] = (by[f.db] ?? 0) + used;
        by[`${f.db}/${f.app || "?"}`] = (by[`${f.db}/${f.app || "?"}`] ?? 0) + used;
      }
      return by;
    },
  };
}

/** The whole machine's CPU time so far, in seconds by state (the first line of /proc/stat). */
export function machineCpu(): { busy: number; idle: number; iowait: number; steal: number } {
  const [, ...fields] = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/);
  const [user, nice, system, idle, iowait, irq, softirq, steal] = fields.map((f) => Number(f) / TICK);
  return { busy: user! + nice! + system! + irq! + softirq!, idle: idle!, iowait: iowait!, steal: steal! };
}

/** What the machine's CPUs did between two machineCpu() readings, in seconds. */
export function machineCpuSince(before: ReturnType<typeof machineCpu>): ReturnType<typeof machineCpu> {
  const now = machineCpu();
  const round = (n: number) => Math.round(n * 10) / 10;
  return {
    busy: round(now.busy - before.busy),
    idle: round(now.idle - before.idle),
    iowait: round(now.iowait - before.iowait),
    steal: round(now.steal - before.steal),
  };
}

/**
 * Every Postgres process's CPU so far, in seconds: the live ones' own time plus, through the
 * postmaster's cutime and cstime, the time of those that have exited. A cross-check of
 * backendMeter that depends on no sampling: backends of other databases and the server's own
 * processes (checkpointer, WAL writer, autovacuum) are in it too.
 */
export function postgresCpu(): number {
  const procs: { pid: number; ppid: number; own: number; children: number }[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue;
    }
    const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    if (comm !== "postgres") continue;
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    procs.push({
      pid: Number(entry),
      ppid: Number(f[1]),
      own: Number(f[11]) + Number(f[12]),
      children: Number(f[13]) + Number(f[14]),
    });
  }
  const pids = new Set(procs.map((p) => p.pid));
  let total = 0;
  for (const p of procs) total += p.own + (pids.has(p.ppid) ? 0 : p.children);
  return total / TICK;
}
