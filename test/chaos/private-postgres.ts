import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import {
  chownSync,
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../support/free-port.js";

/**
 * A PostgreSQL server of the chaos run's own: the machine's binaries (Debian's
 * /usr/lib/postgresql/<version>/bin), a data directory made by initdb on a free port.
 *
 * The nemesis restarts the database server, and the shared one on 5432 belongs to everyone else on
 * the machine (other test files use it at the same time), so it is never touched: restarting this
 * one is the same fault, for this cluster only. Two ways, as production meets them: a fast
 * shutdown (SIGINT to the postmaster: sessions are ended, a checkpoint written) and a crash (SIGKILL
 * of the postmaster: its backends die with it, and the next start replays the WAL). Postgres
 * refuses to run as root, so when the tests run as root the server runs as the `postgres` user.
 */
export interface PrivatePostgres {
  /** postgres://postgres@127.0.0.1:<port>/postgres: a base URL for createTestDatabase. */
  url: string;
  readonly pid: number | undefined;
  /** Stops the server: a fast shutdown, or a crash (SIGKILL of the postmaster). */
  halt(mode: "fast" | "crash"): Promise<void>;
  /** Starts it again on its port and data; resolves once it accepts connections (after any WAL replay). */
  start(): Promise<void>;
  /** halt, `downMs` down, start. */
  restart(mode: "fast" | "crash", downMs: number): Promise<void>;
  ensureRunning(): Promise<void>;
  stop(): Promise<void>;
}

/** The newest Debian PostgreSQL binaries' folder, or PG_BIN. */
function binDir(): string {
  if (process.env.PG_BIN) return process.env.PG_BIN;
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, "bin", "postgres")))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0)
    throw new Error(
      "no PostgreSQL binaries in /usr/lib/postgresql/<version>/bin: set PG_BIN to the folder holding initdb and postgres",
    );
  return join(root, versions[0]!, "bin");
}

const asRoot = process.getuid?.() === 0;

/** A command as the user Postgres may run as. */
function command(bin: string, args: string[]): [string, string[]] {
  return asRoot ? ["runuser", ["-u", "postgres", "--", bin, ...args]] : [bin, args];
}

export async function startPrivatePostgres(options: { logDir: string }): Promise<PrivatePostgres> {
  const bin = binDir();
  mkdirSync(options.logDir, { recursive: true });
  const root = mkdtempSync(join(tmpdir(), "drover-chaos-pg-"));
  const data = join(root, "data");
  if (asRoot) chownSync(root, Number(execFileSync("id", ["-u", "postgres"]).toString().trim()), -1);
  const [initdb, initArgs] = command(join(bin, "initdb"), [
    "-D",
    data,
    "-A",
    "trust",
    "-U",
    "postgres",
    "--no-sync",
    "-E",
    "UTF8",
  ]);
  execFileSync(initdb, initArgs, { stdio: "pipe" });
  const port = await freePort();
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const log = createWriteStream(join(options.logDir, "postgres.log"), { flags: "a" });
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  const launch = async () => {
    const [cmd, args] = command(join(bin, "postgres"), [
      "-D",
      data,
      "-p",
      String(port),
      "-k",
      root,
      "-c",
      "listen_addresses=127.0.0.1",
      "-c",
      "max_connections=200",
      // A restart's fault is the server going away, not the disk: the WAL is still replayed after
      // a crash, and fsync off keeps the small schedule quick.
      "-c",
      "fsync=off",
    ]);
    const proc = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
    proc.stdout?.pipe(log, { end: false });
    proc.stderr?.pipe(log, { end: false });
    child = proc;
    exited = new Promise((resolve) => proc.once("exit", () => resolve()));
    await untilAccepting(bin, port, proc);
  };
  /** The postmaster's pid: runuser's child when the tests run as root. */
  const postmasterPid = (): number | undefined => {
    try {
      const first = execFileSync("head", ["-1", join(data, "postmaster.pid")])
        .toString()
        .trim();
      return Number(first) || undefined;
    } catch {
      return undefined;
    }
  };
  const halt = async (mode: "fast" | "crash") => {
    const proc = child;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const pid = postmasterPid();
    if (pid) process.kill(pid, mode === "crash" ? "SIGKILL" : "SIGINT");
    else proc.kill(mode === "crash" ? "SIGKILL" : "SIGINT");
    const timer = setTimeout(() => proc.kill("SIGKILL"), 20_000);
    await exited;
    clearTimeout(timer);
    if (mode === "crash") await orphansGone(port);
  };
  const onExit = () => {
    const pid = postmasterPid();
    if (pid) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone
      }
    }
    child?.kill("SIGKILL");
  };
  process.once("exit", onExit);

  await launch();
  return {
    url,
    get pid() {
      return postmasterPid();
    },
    halt,
    start: launch,
    async restart(mode, downMs) {
      await halt(mode);
      await new Promise((r) => setTimeout(r, downMs));
      await launch();
    },
    async ensureRunning() {
      if (child && child.exitCode === null && child.signalCode === null) return;
      await launch();
    },
    async stop() {
      await halt("fast");
      process.removeListener("exit", onExit);
      log.end();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/**
 * After a SIGKILL of the postmaster its backends notice it is gone and exit on their own; a new
 * postmaster refuses to start while any of them still holds the shared memory. Waits until no
 * process still listens on, or serves, the port's socket.
 */
async function orphansGone(port: number): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    let busy = false;
    try {
      const out = execFileSync("pgrep", ["-f", `postgres.*-p ${port}`])
        .toString()
        .trim();
      busy = out.length > 0;
    } catch {
      busy = false;
    }
    if (!busy) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function untilAccepting(bin: string, port: number, proc: ChildProcess): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (proc.exitCode !== null)
      throw new Error(`postgres exited (${proc.exitCode}) before it accepted connections`);
    try {
      execFileSync(join(bin, "pg_isready"), ["-q", "-h", "127.0.0.1", "-p", String(port)], {
        stdio: "ignore",
      });
      return;
    } catch {
      // not yet (rejecting connections while it starts or replays its WAL)
    }
    if (Date.now() > deadline)
      throw new Error(`postgres on port ${port} did not accept connections within 30 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
