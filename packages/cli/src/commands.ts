import { type ParseArgsConfig, parseArgs } from "node:util";
import { type Client, Code, isRpcError, type RunService } from "@drover/proto";
import { type Command, type Io, UsageError } from "./command-context.js";
import { audit } from "./commands/audit.js";
import { close } from "./commands/close.js";
import { explain } from "./commands/explain.js";
import { notes } from "./commands/notes.js";
import { complete, resume, retry, revert, stop } from "./commands/run-control.js";
import { runs } from "./commands/runs.js";
import { start } from "./commands/start.js";
import { status } from "./commands/status.js";
import { verify } from "./commands/verify.js";
import { watch } from "./commands/watch.js";
import { responseJson } from "./json-output.js";

export { type Io, UsageError } from "./command-context.js";

export const USAGE = `usage: drover <command> [options]            (global: --address host:port, --token T, --json)

  start    --tenant T --source crm --account A [--api-token T] [--kinds a,b] [--setting k=v ...]
           [--base-url URL]    the source's API address (crm: required; pg-table: none, the token is its connection)
           [--daily-share F]   the share of the account's daily budget the run may spend per day (0 < F <= 1)
           [--follow [--follow-interval S]]   after the import, a catch-up pass every S seconds (300) until complete
           [--dry-run]         walk the source and write nothing; \`status\` then says what a real run would do and cost
  stop     RUN_ID          cancel pending tasks; running ones commit their window and end
  resume   RUN_ID          re-arm a stopped run
  retry    RUN_ID          re-arm a failed run's failed tasks
           [--kind K] [--reason "R"] [--ids 1,2,3]   re-drive: read only the finished run's failed or skipped rows
           matching every filter given (a reason as \`drover notes\` groups it) from the source again
  complete RUN_ID          cut a follow run over: one final pass that starts now, then it finishes
  revert   RUN_ID [--force]  remove what a finished run created (a revert run of its own; --force clears
                           other runs' links to those records instead of refusing)
  status   RUN_ID          phase, tasks, per-kind counts (imported, matched, already here, skipped, failed), verification
  runs     [--tenant T] [--status running,failed,...] [--limit N]
  notes    RUN_ID [--kind K] [--level error|warn|info] [--samples N]
  explain  --tenant T --source crm --account A --kind K SOURCE_ID
  verify   RUN_ID
  watch    RUN_ID          live progress until the run ends; exits 1 if it failed, 3 if stopped
  audit    [RUN_ID] [--tenant T] [--action A] [--since 2026-12-01T00:00Z|24h|7d] [--limit N]
           who did what, newest first: each start, stop, resume, retry, complete and revert (refused
           ones too) and, for an admin, each API-key change
  close    --tenant T [--source crm] --account A [--reopen]   close a tenant's migration of an account: its
           ledger is removed after the grace period, and a run after that imports as if new

Environment: DROVER_ADDRESS (default 127.0.0.1:50051), DROVER_TOKEN (bearer token), DROVER_SOURCE_TOKEN (the
source's API token for start, so it stays out of shell history).
Exit codes: 0 done, 1 other failure, 2 bad input, 4 not found, 5 wrong state or conflict, 69 no coordinator
answered at DROVER_ADDRESS, 75 the coordinator answered it cannot now (e.g. the source is down; retry),
77 credentials; watch: 1 the run failed, 3 it was stopped.`;

/** Every option of every command: parseArgs refuses any other. */
const OPTIONS = {
  json: { type: "boolean", default: false },
  force: { type: "boolean", default: false },
  reopen: { type: "boolean", default: false },
  tenant: { type: "string" },
  source: { type: "string" },
  account: { type: "string" },
  kinds: { type: "string" },
  kind: { type: "string" },
  reason: { type: "string" },
  ids: { type: "string" },
  level: { type: "string" },
  samples: { type: "string" },
  status: { type: "string" },
  limit: { type: "string" },
  action: { type: "string" },
  since: { type: "string" },
  "base-url": { type: "string" },
  "api-token": { type: "string" },
  setting: { type: "string", multiple: true },
  "daily-share": { type: "string" },
  follow: { type: "boolean", default: false },
  "follow-interval": { type: "string" },
  "dry-run": { type: "boolean" },
  address: { type: "string" },
  token: { type: "string" },
} as const satisfies ParseArgsConfig["options"];

/** Every command by the name typed after `drover`. */
const COMMANDS: Readonly<Record<string, Command>> = {
  start,
  stop,
  resume,
  retry,
  complete,
  revert,
  status,
  runs,
  notes,
  explain,
  verify,
  watch,
  audit,
  close,
};

/** Runs one command. Returns the process exit code. */
export async function runCommand(
  command: string,
  argv: string[],
  client: Client<typeof RunService>,
  io: Io,
  env: NodeJS.ProcessEnv,
): Promise<number> {
  const { values: flags, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: OPTIONS,
  });
  // Own names only: a name such as "toString" is no command.
  const run = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined;
  if (!run) throw new UsageError(`unknown command "${command}"`);
  const json = flags.json === true;
  return run({
    client,
    io,
    env,
    flags,
    positionals,
    json,
    // Tables fit a terminal; sent to a file or a pipe, nothing is cut.
    width: io.isTty ? io.columns : undefined,
    // With --json every command prints the response of the RPC it called, as that message's JSON.
    print: (human, schema, response) => io.out(json ? responseJson(schema, response) : human),
  });
}

/**
 * The exit codes a script can rely on (sysexits.h where one fits). `watch` adds its own: 0 the run
 * succeeded, 1 it failed, 3 it was stopped.
 */
export const EXIT = {
  /** Something else went wrong (the message says what). */
  failure: 1,
  /** Bad command line or a request the coordinator refused as invalid. */
  usage: 2,
  notFound: 4,
  /** The run is in the wrong state for that, or it conflicts with another. */
  conflict: 5,
  /** No coordinator answered at the address (EX_UNAVAILABLE). */
  unreachable: 69,
  /** The coordinator answered that it cannot do it now, e.g. the source is down: retry (EX_TEMPFAIL). */
  tryLater: 75,
  /** Missing or insufficient credentials (EX_NOPERM). */
  credentials: 77,
} as const;

/** Server errors as sentences, with an exit code per kind of problem. */
export function describeFailure(
  err: unknown,
  address = "the coordinator's address",
): { message: string; code: number } {
  if (err instanceof UsageError) return { message: `${err.message}\n\n${USAGE}`, code: EXIT.usage };
  if (err instanceof TypeError && /parseArgs|option/i.test(err.message))
    return { message: `${err.message}\n\n${USAGE}`, code: EXIT.usage };
  if (isRpcError(err)) {
    switch (err.code) {
      case Code.UNAVAILABLE:
        // The coordinator itself may answer UNAVAILABLE (the source it had to read is down, it is
        // shutting down): that is not a wrong address, and retrying later is the fix.
        if (err.answered)
          return {
            message: `the coordinator answered but cannot do that now: ${err.message}`,
            code: EXIT.tryLater,
          };
        return {
          // grpc-js ends its message with an empty "Resolution note: ." when the name resolved.
          message: `cannot reach the coordinator at ${address}: ${err.message.replace(/\.? *Resolution note: *\.?$/, "")}. Is it running, and is DROVER_ADDRESS right?`,
          code: EXIT.unreachable,
        };
      case Code.UNAUTHENTICATED:
        return {
          message: `the coordinator wants credentials: set DROVER_TOKEN (${err.message})`,
          code: EXIT.credentials,
        };
      case Code.PERMISSION_DENIED:
        return { message: `this token may not do that: ${err.message}`, code: EXIT.credentials };
      case Code.NOT_FOUND:
        return { message: err.message, code: EXIT.notFound };
      case Code.INVALID_ARGUMENT:
        return { message: `the request was refused: ${err.message}`, code: EXIT.usage };
      case Code.ALREADY_EXISTS:
      case Code.FAILED_PRECONDITION:
        return { message: err.message, code: EXIT.conflict };
      default:
        return { message: `the coordinator answered ${Code[err.code]}: ${err.message}`, code: EXIT.failure };
    }
  }
  return { message: `unexpected error: ${(err as Error).message ?? String(err)}`, code: EXIT.failure };
}
