import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { NODE_ARGS } from "./service-spec.js";

export const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));

const DEFAULT_READY_TIMEOUT_MS = 90_000;

export interface ServiceProcess {
  name: string;
  pid: number;
  /** The JSON line the service printed when it became ready. */
  ready: Record<string, unknown>;
  /** Resolves with the exit code (or signal name) when the process ends. */
  exited: Promise<number | string>;
  /** Sends `signal` and waits for the exit; SIGKILLs after `timeoutMs`. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<number | string>;
  /** Sends a signal without waiting (SIGKILL, SIGSTOP, SIGCONT...). */
  signal(signal: NodeJS.Signals): void;
}

export interface SpawnOptions {
  name: string;
  /** A TypeScript entry point, relative to the repository root. */
  entry: string;
  args?: string[];
  env?: Record<string, string>;
  /** The `event` of the JSON line that says the service is ready. */
  readyEvent: string;
  /** Where stdout and stderr go; the directory is created. */
  logDir: string;
  /**
   * How long the service may take to say it is ready (default 90 s): a cold start transpiles its
   * TypeScript first, which on a loaded two-core machine has taken over 30 s; a service that never
   * gets ready still fails, only later.
   */
  readyTimeoutMs?: number;
  /**
   * A command the service's node runs under, e.g. `["ip", "netns", "exec", "<name>"]` to start it in
   * a network namespace of its own (the partition tests). It must exec node in its place, so
   * signals reach the service.
   */
  launcher?: string[];
  /** Where to start from; runFrom() (DROVER_CLUSTER_RUN_FROM) when not given. */
  runFrom?: RunFrom;
  /** Node's own flags (the service spec's nodeFlags), before the entry's arguments. */
  nodeFlags?: readonly string[];
}

/**
 * Every child this process started and that has not exited yet. When this process ends (a test
 * runner finishing, a demo interrupted, an uncaught error), whatever is still here is SIGKILLed:
 * a service must never outlive the cluster that started it.
 */
const liveChildren = new Set<ChildProcess>();
let reapOnExit = false;
function track(child: ChildProcess): void {
  liveChildren.add(child);
  child.once("exit", () => liveChildren.delete(child));
  if (reapOnExit) return;
  reapOnExit = true;
  process.once("exit", () => {
    for (const c of liveChildren) c.kill("SIGKILL");
  });
}

/** Ends a child that never became ready, so the caller's rejection leaves nothing running. */
async function killUnready(child: ChildProcess, exited: Promise<number | string>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGKILL");
  await exited;
}

/**
 * Where services start from: `source` (the default) runs the TypeScript through tsx, as the images
 * do; `build` runs what `pnpm build` compiled (each package's dist/), which starts in ~0.7 s of CPU
 * instead of ~2.5 (tsx's loader hooks on every module). The same code either way; the bench starts
 * from the build (run.ts builds first), since it starts some forty processes per run.
 */
export type RunFrom = "source" | "build";

export function runFrom(env: NodeJS.ProcessEnv = process.env): RunFrom {
  const value = env.DROVER_CLUSTER_RUN_FROM ?? "source";
  if (value !== "source" && value !== "build")
    throw new Error(`DROVER_CLUSTER_RUN_FROM must be source or build, not "${value}"`);
  return value;
}

/** Node's arguments before the service's own: the TypeScript entry under tsx, or its compiled twin. */
function entryArgs(entry: string, from: RunFrom): string[] {
  if (from === "source") return [...NODE_ARGS, join(REPO_ROOT, entry)];
  const compiled = join(REPO_ROOT, entry.replace(/\/src\//, "/dist/").replace(/\.ts$/, ".js"));
  if (!existsSync(compiled))
    throw new Error(
      `${compiled} is missing: run pnpm build first, or start from source (DROVER_CLUSTER_RUN_FROM=source)`,
    );
  return [compiled];
}

/**
 * DROVER_CLUSTER_NODE_FLAGS: Node flags for every service a cluster starts, for the tools that are
 * not allowed in NODE_OPTIONS, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` (a profile per process,
 * written when it exits gracefully). `{name}` is replaced by the service's name.
 */
function extraNodeFlags(name: string): string[] {
  const flags = process.env.DROVER_CLUSTER_NODE_FLAGS?.trim();
  return flags ? flags.split(/\s+/).map((f) => f.replaceAll("{name}", name)) : [];
}

/**
 * Starts a Drover service as a separate Node process (from its TypeScript source through tsx, or
 * from its build: runFrom) and waits for its ready line. Logs go to a file per service, so a
 * failing test or demo can point at them.
 */
export async function spawnService(options: SpawnOptions): Promise<ServiceProcess> {
  // The start command of service-spec.ts (the images' too), with this Node's own binary, under the
  // launcher if one is given (a network namespace in the partition tests).
  const [command, ...args] = [
    ...(options.launcher ?? []),
    process.execPath,
    ...(options.nodeFlags ?? []),
    ...extraNodeFlags(options.name),
    ...entryArgs(options.entry, options.runFrom ?? runFrom()),
    ...(options.args ?? []),
  ];
  mkdirSync(options.logDir, { recursive: true });
  const logPath = join(options.logDir, `${options.name}.log`);
  const log = createWriteStream(logPath, { flags: "a" });
  const child: ChildProcess = spawn(command!, args, {
    cwd: REPO_ROOT,
    env: { ...process.env, ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  track(child);
  child.stderr?.pipe(log, { end: false });
  const exited = new Promise<number | string>((resolve) => {
    child.once("exit", (code, signal) => {
      resolve(code ?? signal ?? -1);
      log.end();
    });
  });

  let settled = false;
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setTimeout(() => {
      settled = true;
      const error = new Error(
        `${options.name} did not become ready within ${options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS} ms (pid ${child.pid}, killed); see ${logPath}`,
      );
      void killUnready(child, exited).then(() => reject(error));
    }, options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS);
    const lines = createInterface({ input: child.stdout! });
    lines.on("line", (line) => {
      log.write(`${line}\n`);
      if (settled || !line.startsWith("{")) return;
      try {
        const parsed = JSON.parse(line) as Record<string, unknown>;
        if (parsed.event === options.readyEvent) {
          settled = true;
          clearTimeout(timer);
          resolve(parsed);
        }
      } catch {
        // an ordinary log line
      }
    });
    void exited.then((code) => {
      if (settled) return;
      clearTimeout(timer);
      reject(new Error(`${options.name} exited (${code}) before it was ready; see ${logPath}`));
    });
  });

  return {
    name: options.name,
    pid: child.pid!,
    ready,
    exited,
    signal(signal) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
    async stop(signal = "SIGTERM", timeoutMs = 30_000) {
      if (child.exitCode !== null || child.signalCode !== null) return exited;
      child.kill(signal);
      const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}
