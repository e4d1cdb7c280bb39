import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants, createWriteStream, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { freePort } from "../support/free-port.js";

/**
 * A nats-server of the chaos run's own: the same binary the machine runs (services.md: JetStream
 * with a file store, `-js -sd <dir>`), on a free port, with a store directory of its own.
 *
 * The nemesis restarts NATS, and the shared server on 4222 belongs to everyone else on the
 * machine (other test runs use it at the same time), so it is never touched: restarting this one
 * is the same fault, for this cluster only. A restart is SIGTERM (JetStream flushes its file store),
 * then the same command on the same port and directory, so streams and their messages survive it.
 */
export interface PrivateNats {
  url: string;
  storeDir: string;
  readonly pid: number | undefined;
  /** Stops the server, leaves it down for `downMs`, starts it again; resolves once JetStream answers. */
  restart(downMs: number): Promise<void>;
  /** Makes sure it runs (a no-op when it does). */
  ensureRunning(): Promise<void>;
  stop(): Promise<void>;
}

/** Where the nats-server binary is: NATS_SERVER_BIN, the Debian package's path, or PATH. */
export function natsServerBinary(): string | undefined {
  const candidates = [
    process.env.NATS_SERVER_BIN,
    "/usr/sbin/nats-server",
    "/usr/local/bin/nats-server",
    ...(process.env.PATH ?? "").split(delimiter).map((dir) => join(dir, "nats-server")),
  ];
  for (const path of candidates) {
    if (!path) continue;
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // next
    }
  }
  return undefined;
}

export async function startPrivateNats(options: { logDir: string; binary?: string }): Promise<PrivateNats> {
  const binary = options.binary ?? natsServerBinary();
  if (!binary) {
    throw new Error(
      "no nats-server binary found: install it (Debian: apt-get install nats-server) or set NATS_SERVER_BIN",
    );
  }
  mkdirSync(options.logDir, { recursive: true });
  const storeDir = mkdtempSync(join(tmpdir(), "drover-chaos-nats-"));
  const port = await freePort();
  const url = `127.0.0.1:${port}`;
  const log = createWriteStream(join(options.logDir, "nats-server.log"), { flags: "a" });
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  const launch = async () => {
    const proc = spawn(binary, ["-a", "127.0.0.1", "-p", String(port), "-js", "-sd", storeDir], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    proc.stdout?.pipe(log, { end: false });
    proc.stderr?.pipe(log, { end: false });
    child = proc;
    exited = new Promise((resolve) => proc.once("exit", () => resolve()));
    await untilJetStreamAnswers(url, proc);
  };
  const halt = async () => {
    const proc = child;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill("SIGTERM");
    const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  };
  // Whatever happens to the test process, the server goes with it.
  const onExit = () => child?.kill("SIGKILL");
  process.once("exit", onExit);

  await launch();
  return {
    url,
    storeDir,
    get pid() {
      return child?.pid;
    },
    async restart(downMs) {
      await halt();
      await new Promise((r) => setTimeout(r, downMs));
      await launch();
    },
    async ensureRunning() {
      if (child && child.exitCode === null && child.signalCode === null) return;
      await launch();
    },
    async stop() {
      await halt();
      process.removeListener("exit", onExit);
      log.end();
      rmSync(storeDir, { recursive: true, force: true });
    },
  };
}

async function untilJetStreamAnswers(url: string, proc: ChildProcess): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`nats-server exited (${proc.exitCode}) before it answered`);
    try {
      const nc = await connect({ servers: url, timeout: 1_000, maxReconnectAttempts: 0 });
      try {
        const reply = await nc.request("$JS.API.INFO", "", { timeout: 1_000 });
        const info = JSON.parse(new TextDecoder().decode(reply.data)) as { error?: unknown };
        if (!info.error) return;
      } finally {
        await nc.close();
      }
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`nats-server on ${url} did not answer within 15 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
