import { parseArgs } from "node:util";
import {
  type Client,
  Code,
  CompleteRunResponseSchema,
  type DescMessage,
  ExplainRecordResponseSchema,
  GetRunResponseSchema,
  isRpcError,
  ListAuditEventsResponseSchema,
  ListNotesResponseSchema,
  ListRunsResponseSchema,
  type MessageShape,
  ResumeRunResponseSchema,
  RetryRunResponseSchema,
  RevertRunResponseSchema,
  RUN_STATUSES,
  type Run,
  type RunService,
  RunStatus,
  runStatusFromName,
  StartRunResponseSchema,
  StopRunResponseSchema,
  timestampDate,
  timestampFromDate,
  VerifyRunResponseSchema,
  WatchRunResponseSchema,
} from "@drover/proto";
import { responseJson } from "./json-output.js";
import {
  isTerminal,
  KindClock,
  progressBlock,
  runSummary,
  statusName,
  table,
  verificationTable,
  visibleLength,
} from "./render.js";

export interface Io {
  out(text: string): void;
  err(text: string): void;
  isTty: boolean;
  /** The terminal's width when output goes to one (read at each redraw: it may be resized). */
  readonly columns?: number;
}

export class UsageError extends Error {}

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

Environment: DROVER_ADDRESS (default 127.0.0.1:50051), DROVER_TOKEN (bearer token), DROVER_SOURCE_TOKEN (the
source's API token for start, so it stays out of shell history).
Exit codes: 0 done, 1 other failure, 2 bad input, 4 not found, 5 wrong state or conflict, 69 no coordinator
answered at DROVER_ADDRESS, 75 the coordinator answered it cannot now (e.g. the source is down; retry),
77 credentials; watch: 1 the run failed, 3 it was stopped.`;

type Flags = Record<string, string | boolean | string[] | undefined>;

function one(positionals: string[], what: string): string {
  if (positionals.length !== 1) throw new UsageError(`expected exactly one ${what}`);
  return positionals[0]!;
}

function need(flags: Flags, name: string): string {
  const v = flags[name];
  if (typeof v !== "string" || v === "") throw new UsageError(`--${name} is required`);
  return v;
}

/** retry's filter (re-drive): empty fields for a plain retry. Kind and reason are the coordinator's to check. */
function redriveFlags(flags: Flags): { kind: string; reason: string; sourceIds: string[] } {
  const ids = flags.ids as string | undefined;
  const sourceIds = ids === undefined ? [] : ids.split(",").map((id) => id.trim());
  if (ids !== undefined && (sourceIds.length === 0 || sourceIds.some((id) => id === "")))
    throw new UsageError(`--ids takes source ids separated by commas (e.g. 1,2,3), got "${ids}"`);
  return {
    kind: (flags.kind as string | undefined) ?? "",
    reason: (flags.reason as string | undefined) ?? "",
    sourceIds,
  };
}

/** `--since`: an ISO time, or a span back from now (`90m`, `24h`, `7d`). */
function sinceDate(text: string): Date {
  const span = /^(\d+)([mhd])$/.exec(text);
  if (span) {
    const unit = { m: 60_000, h: 3_600_000, d: 86_400_000 }[span[2] as "m" | "h" | "d"];
    return new Date(Date.now() - Number(span[1]) * unit);
  }
  const at = new Date(text);
  if (Number.isNaN(at.getTime()))
    throw new UsageError(
      `--since takes an ISO time (2026-12-01T00:00Z) or a span such as 24h or 7d, got "${text}"`,
    );
  return at;
}

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
    options: {
      json: { type: "boolean", default: false },
      force: { type: "boolean", default: false },
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
    },
  });
  const json = flags.json === true;
  // Tables fit a terminal; sent to a file or a pipe, nothing is cut.
  const width = io.isTty ? io.columns : undefined;
  // With --json every command prints the response of the RPC it called, as that message's JSON.
  const print = <Desc extends DescMessage>(human: string, schema: Desc, response: MessageShape<Desc>) =>
    io.out(json ? responseJson(schema, response) : human);

  switch (command) {
    case "start": {
      const settings: Record<string, string> = {};
      for (const s of (flags.setting as string[] | undefined) ?? []) {
        const eq = s.indexOf("=");
        if (eq <= 0) throw new UsageError(`--setting takes key=value, got "${s}"`);
        settings[s.slice(0, eq)] = s.slice(eq + 1);
      }
      const share = flags["daily-share"] as string | undefined;
      const dailyShare = share === undefined ? undefined : Number(share);
      if (dailyShare !== undefined && !(dailyShare > 0 && dailyShare <= 1))
        throw new UsageError(`--daily-share takes a share above 0 and at most 1 (e.g. 0.5), got "${share}"`);
      const interval = flags["follow-interval"] as string | undefined;
      if (interval !== undefined && flags.follow !== true)
        throw new UsageError("--follow-interval needs --follow");
      const followIntervalSeconds = interval === undefined ? undefined : Number(interval);
      if (
        followIntervalSeconds !== undefined &&
        !(Number.isInteger(followIntervalSeconds) && followIntervalSeconds >= 1)
      )
        throw new UsageError(`--follow-interval takes whole seconds, at least 1, got "${interval}"`);
      const response = await client.startRun({
        tenantId: need(flags, "tenant"),
        source: (flags.source as string | undefined) ?? "crm",
        sourceAccount: need(flags, "account"),
        kinds: typeof flags.kinds === "string" ? flags.kinds.split(",").filter(Boolean) : [],
        sourceConfig: {
          // Only some sources have an API address (crm does, pg-table does not): the source says.
          baseUrl: (flags["base-url"] as string | undefined) ?? "",
          apiToken: (flags["api-token"] as string | undefined) ?? env.DROVER_SOURCE_TOKEN ?? "",
          settings,
        },
        ...(dailyShare !== undefined ? { dailyShare } : {}),
        ...(flags.follow === true ? { follow: true } : {}),
        ...(followIntervalSeconds !== undefined ? { followIntervalSeconds } : {}),
        ...(flags["dry-run"] === true ? { dryRun: true } : {}),
      });
      const run = response.run!;
      const what = run.dryRun ? "dry run" : "run";
      print(
        `started ${what} ${run.id} (${statusName(run.status)})\nfollow it with: drover watch ${run.id}${run.dryRun ? `; its report: drover status ${run.id}` : ""}`,
        StartRunResponseSchema,
        response,
      );
      return 0;
    }
    case "stop":
    case "resume":
    case "retry": {
      const runId = one(positionals, "run id");
      const human = (run: Run | undefined) =>
        `run ${runId} is ${statusName(run?.status ?? RunStatus.UNSPECIFIED)}`;
      if (command === "stop") {
        const response = await client.stopRun({ runId });
        print(human(response.run), StopRunResponseSchema, response);
      } else if (command === "resume") {
        const response = await client.resumeRun({ runId });
        print(human(response.run), ResumeRunResponseSchema, response);
      } else {
        const response = await client.retryRun({ runId, ...redriveFlags(flags) });
        print(human(response.run), RetryRunResponseSchema, response);
      }
      return 0;
    }
    case "complete": {
      const runId = one(positionals, "run id");
      const response = await client.completeRun({ runId });
      print(
        `run ${runId} is cutting over: one final pass, then it finishes (drover watch ${runId})`,
        CompleteRunResponseSchema,
        response,
      );
      return 0;
    }
    case "revert": {
      const runId = one(positionals, "run id");
      const response = await client.revertRun({ runId, force: flags.force === true });
      const run = response.run!;
      print(
        `reverting run ${runId}: revert run ${run.id} (${statusName(run.status)})\nfollow it with: drover watch ${run.id}`,
        RevertRunResponseSchema,
        response,
      );
      return 0;
    }
    case "status": {
      const response = await client.getRun({ runId: one(positionals, "run id") });
      print(runSummary(response.run!, { width }), GetRunResponseSchema, response);
      return 0;
    }
    case "runs": {
      const statuses = typeof flags.status === "string" ? flags.status.split(",").filter(Boolean) : [];
      const unknown = statuses.filter((s) => runStatusFromName(s) === undefined);
      if (unknown.length > 0)
        throw new UsageError(`unknown status ${unknown.join(", ")}; use ${RUN_STATUSES.join(", ")}`);
      const limit = typeof flags.limit === "string" ? Number(flags.limit) : 20;
      if (!Number.isInteger(limit) || limit < 1 || limit > 500)
        throw new UsageError("--limit must be a whole number from 1 to 500");
      const response = await client.listRuns({
        tenantId: (flags.tenant as string | undefined) ?? "",
        statuses: statuses.map((s) => runStatusFromName(s)!),
        pageSize: limit,
      });
      const { runs } = response;
      print(
        runs.length === 0
          ? "no runs"
          : table(
              ["run", "tenant", "source", "status", "phase", "rows", "created"],
              runs.map((r) => [
                r.id,
                r.tenantId,
                `${r.source}:${r.sourceAccount}`,
                statusName(r.status),
                `${Math.min(r.currentPhase + 1, r.phases.length)}/${r.phases.length}`,
                String(
                  r.progress.reduce(
                    (n, p) => n + p.imported + p.matched + p.alreadyHere + p.skipped + p.failed,
                    0n,
                  ),
                ),
                r.createdAt
                  ? new Date(Number(r.createdAt.seconds) * 1000).toISOString().replace("T", " ").slice(0, 19)
                  : "",
              ]),
              { width },
            ),
        ListRunsResponseSchema,
        response,
      );
      return 0;
    }
    case "notes": {
      const response = await client.listNotes({
        runId: one(positionals, "run id"),
        kind: (flags.kind as string | undefined) ?? "",
        level: (flags.level as string | undefined) ?? "",
        samples: typeof flags.samples === "string" ? Number(flags.samples) : 0,
      });
      const { groups } = response;
      print(
        groups.length === 0
          ? "no notes: nothing was skipped or failed"
          : table(
              ["count", "level", "kind", "reason", "e.g. source ids"],
              groups.map((g) => [String(g.count), g.level, g.kind, g.reason, g.sampleSubjectIds.join(", ")]),
              { width },
            ),
        ListNotesResponseSchema,
        response,
      );
      return 0;
    }
    case "explain": {
      const sourceId = one(positionals, "source id");
      const res = await client.explainRecord({
        tenantId: need(flags, "tenant"),
        source: (flags.source as string | undefined) ?? "crm",
        sourceAccount: need(flags, "account"),
        kind: need(flags, "kind"),
        sourceId,
      });
      const lines = [res.explanation];
      if (res.entry) {
        lines.push(
          `ledger: ${res.entry.action} ${res.entry.recordType} ${res.entry.recordId} (run ${res.entry.runId}, task ${res.entry.taskId}${
            res.entry.recordedAt ? `, at ${timestampDate(res.entry.recordedAt).toISOString()}` : ""
          })`,
        );
      }
      for (const n of res.notes)
        lines.push(
          `note: ${n.level} ${n.reason} (run ${n.runId}${n.taskId ? `, task ${n.taskId}` : ""}${
            n.createdAt ? `, at ${timestampDate(n.createdAt).toISOString()}` : ""
          })`,
        );
      print(lines.join("\n"), ExplainRecordResponseSchema, res);
      return 0;
    }
    case "verify": {
      const response = await client.verifyRun({ runId: one(positionals, "run id") });
      const v = response.verification;
      print(
        v
          ? [
              v.ok
                ? "verification passed"
                : v.error
                  ? `verification could not finish: ${v.error}`
                  : "verification found problems",
              verificationTable(v, "ledger", { width }),
            ].join("\n")
          : "no verification result",
        VerifyRunResponseSchema,
        response,
      );
      return v && !v.ok ? 1 : 0;
    }
    case "watch": {
      const runId = one(positionals, "run id");
      const started = Date.now();
      let last: Run | undefined;
      // The lines the last frame left on the screen, each one terminal row (progressBlock fits them).
      let drawn: string[] = [];
      const clock = new KindClock();
      for await (const update of client.watchRun({ runId })) {
        last = update.run!;
        if (json) {
          // One response per line (JSON Lines), so a script reads each as it comes.
          io.out(responseJson(WatchRunResponseSchema, update, { compact: true }));
          continue;
        }
        // The run's own age, so a watch begun mid-run does not count its rows as done since it began.
        const since = last.startedAt ? timestampDate(last.startedAt).getTime() : started;
        const columns = io.isTty ? io.columns : undefined;
        const block = progressBlock(last, Date.now() - Math.min(since, started), clock, columns);
        if (io.isTty && drawn.length > 0) {
          // Up over every row the last frame took (more than its lines if the terminal was made
          // narrower since), then clear to the end of the screen: no stale line stays behind.
          const rows = drawn.reduce((n, l) => n + rowsTaken(l, columns), 0);
          io.out(`\x1b[${rows}A\r\x1b[J${block.join("\n")}`);
        } else io.out(block.join("\n"));
        drawn = block;
      }
      if (!last) return 1;
      if (!json) io.out(`\n${runSummary(last, { width })}`);
      if (!isTerminal(last.status)) return 1;
      return last.status === RunStatus.SUCCEEDED ? 0 : last.status === RunStatus.STOPPED ? 3 : 1;
    }
    case "audit": {
      if (positionals.length > 1) throw new UsageError("expected at most one run id");
      const limit = typeof flags.limit === "string" ? Number(flags.limit) : 50;
      if (!Number.isInteger(limit) || limit < 1 || limit > 500)
        throw new UsageError("--limit must be a whole number from 1 to 500");
      const since = typeof flags.since === "string" ? sinceDate(flags.since) : undefined;
      const response = await client.listAuditEvents({
        runId: positionals[0] ?? "",
        tenantId: (flags.tenant as string | undefined) ?? "",
        action: (flags.action as string | undefined) ?? "",
        ...(since ? { since: timestampFromDate(since) } : {}),
        pageSize: limit,
      });
      const { events } = response;
      print(
        events.length === 0
          ? "no audit events"
          : table(
              ["at", "who", "action", "tenant", "run", "outcome", "from", "details"],
              events.map((e) => [
                e.at ? timestampDate(e.at).toISOString().replace("T", " ").slice(0, 19) : "",
                e.actor,
                e.action,
                e.tenantId,
                e.runId,
                e.outcome === "ok" ? "ok" : `${e.outcome}: ${e.message}`,
                e.peer,
                Object.entries(e.details)
                  .map(([k, v]) => `${k}=${v}`)
                  .join(" "),
              ]),
              { width },
            ),
        ListAuditEventsResponseSchema,
        response,
      );
      return 0;
    }
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
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

/** Terminal rows a line takes at this width (a line wider than the terminal wraps). */
function rowsTaken(line: string, columns: number | undefined): number {
  return columns ? Math.max(1, Math.ceil(visibleLength(line) / columns)) : 1;
}
