import { type RunRow, runs } from "@drover/db";
import type { Run, RunService, ServiceImplementation } from "@drover/proto";
import { and, desc, eq, getTableColumns, inArray, sql } from "drizzle-orm";
import { callerTenants } from "./auth.js";
import type { CoordinatorContext } from "./context.js";
import { loadVisibleRun } from "./run-access.js";
import { currentNoteGroups, type NoteGroupFilter } from "./run-outcomes.js";
import { fromProtoStatus, loadRun, runView, TERMINAL_STATUSES } from "./run-view.js";
import { DEFAULT_BUCKETS, MAX_BUCKETS, runThroughput } from "./throughput.js";
import {
  invalid,
  optionalText,
  requireKnownKind,
  requireProvider,
  requireRunId,
  requireTenant,
} from "./validation.js";

const WATCH_POLL_MS = 500;
const MAX_PAGE_SIZE = 500;

type RunQueries = Pick<
  ServiceImplementation<typeof RunService>,
  "getRun" | "listRuns" | "watchRun" | "listNotes" | "getThroughput"
>;

/** Run queries: read-only views of runs, their notes and their throughput. Nothing here moves a run. */
export function runQueries(ctx: CoordinatorContext): RunQueries {
  const { db } = ctx;
  return {
    async getRun(req, call) {
      const run = await loadVisibleRun(db, req.runId, call);
      return { run: await runView(db, ctx.providers, run) };
    },

    listRuns: (req, call) => listRuns(ctx, req, call),

    async *watchRun(req, call) {
      const first = await loadVisibleRun(db, req.runId, call);
      let previous = "";
      let run: RunRow | undefined = first;
      while (run && !call.signal.aborted) {
        const view = await runView(db, ctx.providers, run);
        const digest = watchedDigest(view);
        if (digest !== previous) {
          previous = digest;
          yield { run: view };
        }
        if (TERMINAL_STATUSES.includes(run.status)) return;
        await new Promise((r) => setTimeout(r, WATCH_POLL_MS));
        run = await loadRun(db, first.id);
      }
    },

    async listNotes(req, call) {
      const run = await loadVisibleRun(db, req.runId, call);
      const samples = req.samples === 0 ? 5 : req.samples;
      if (samples < 0 || samples > 100) throw invalid("samples must be between 1 and 100");
      if (req.level && !["error", "warn", "info"].includes(req.level))
        throw invalid('level must be "error", "warn" or "info"');
      // An unknown kind is a caller's mistake, as RetryRun and ExplainRecord say: not an empty answer.
      if (req.kind)
        requireKnownKind(requireProvider(ctx.providers, run.source), optionalText("kind", req.kind, 64));
      return {
        groups: await currentNoteGroups(db, ctx.providers, run, {
          kind: req.kind,
          level: (req.level || undefined) as NoteGroupFilter["level"],
          samples,
        }),
      };
    },

    async getThroughput(req, call) {
      const run = await loadVisibleRun(db, req.runId, call);
      const buckets = req.buckets === 0 ? DEFAULT_BUCKETS : req.buckets;
      if (buckets < 1 || buckets > MAX_BUCKETS) throw invalid(`buckets must be between 1 and ${MAX_BUCKETS}`);
      // A pruned run keeps its ledger rows (its failed rows' notes are gone): still worth drawing.
      return runThroughput(db, run, buckets);
    },
  };
}

/** created_at to the microsecond, as the page token carries it. */
const CURSOR_AT = sql`to_char(${runs.createdAt} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

function encodePageToken(run: { cursorAt: string; id: string }): string {
  return Buffer.from(`${run.cursorAt}|${run.id}`).toString("base64url");
}

function decodePageToken(token: string): [string, string] {
  const notIssued = () => invalid("page_token is not a token this server issued");
  const [at, id] = Buffer.from(token, "base64url").toString().split("|");
  if (
    !id ||
    !at ||
    !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z$/.test(at) ||
    Number.isNaN(new Date(at).getTime())
  ) {
    throw notIssued();
  }
  // The run id inside is the token's, not a field the caller sent: a bad one is a forged token.
  try {
    return [at, requireRunId(id)];
  } catch {
    throw notIssued();
  }
}

/** A page of runs, newest first, the caller's tenants only, by a keyset token. */
async function listRuns(
  ctx: CoordinatorContext,
  ...[req, call]: Parameters<NonNullable<RunQueries["listRuns"]>>
): ReturnType<NonNullable<RunQueries["listRuns"]>> {
  const { db } = ctx;
  const pageSize = req.pageSize === 0 ? 50 : req.pageSize;
  if (pageSize < 0 || pageSize > MAX_PAGE_SIZE)
    throw invalid(`page_size must be between 1 and ${MAX_PAGE_SIZE}`);
  const filters = [];
  if (req.tenantId) filters.push(eq(runs.tenantId, requireTenant(req.tenantId)));
  // A tenant-scoped caller's listing holds its own tenants' runs and nothing else.
  const tenants = callerTenants(call);
  if (tenants) filters.push(inArray(runs.tenantId, [...tenants]));
  if (req.statuses.length > 0) {
    const statuses = req.statuses.map((s) => fromProtoStatus(s));
    if (statuses.some((s) => s === undefined)) throw invalid("statuses holds an unknown status");
    filters.push(inArray(runs.status, statuses as RunRow["status"][]));
  }
  if (req.pageToken) {
    const [at, id] = decodePageToken(req.pageToken);
    // Compared at the database's microsecond precision: a JS Date would drop the microseconds and
    // skip the rest of a page's millisecond (runs admitted in one millisecond, or one statement).
    filters.push(sql`(${runs.createdAt}, ${runs.id}) < (${at}::timestamptz, ${id}::uuid)`);
  }
  const rows = await db
    .select({ ...getTableColumns(runs), cursorAt: sql<string>`${CURSOR_AT}` })
    .from(runs)
    .where(filters.length > 0 ? and(...filters) : undefined)
    .orderBy(desc(runs.createdAt), desc(runs.id))
    .limit(pageSize + 1);
  const page = rows.slice(0, pageSize);
  const last = page[page.length - 1];
  return {
    runs: await Promise.all(page.map((r) => runView(db, ctx.providers, r))),
    nextPageToken: rows.length > pageSize && last ? encodePageToken(last) : "",
  };
}

/**
 * What WatchRun sends again when it changes. A revert run's progress is its revert counts; a follow
 * run's, its passes (not its lag, which moves every second: the page counts it on from the pass's start).
 */
function watchedDigest(view: Run): string {
  return JSON.stringify(
    [
      view.status,
      view.currentPhase,
      view.progress,
      view.tasks,
      view.budget,
      view.revert,
      view.follow?.passes,
      view.follow?.cutoverAt,
    ],
    (_k, v) => (typeof v === "bigint" ? v.toString() : v),
  );
}
