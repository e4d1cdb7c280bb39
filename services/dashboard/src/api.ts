import type { IncomingMessage, ServerResponse } from "node:http";
import { MAX_TOKEN_LENGTH } from "@drover/auth";
import { Code, isRpcError, runStatusFromName } from "@drover/proto";
import { type Coordinator, callOptions } from "./coordinator.js";
import { HttpProblem, problemFor } from "./http-errors.js";
import { sendJson } from "./responses.js";
import { auditEventJson, noteGroupJson, runJson, throughputJson } from "./run-json.js";
import { streamRun } from "./run-stream.js";

const RUN_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const RUN_PATH = /^\/api\/runs\/([^/]+)(?:\/(events|throughput|history|stop|resume|retry|revert))?$/;

/** One API request about one run, with the operator's key to forward. */
interface RunRequest {
  coordinator: Coordinator;
  res: ServerResponse;
  runId: string;
  token: string;
  url: URL;
}

/**
 * The JSON API under /api/: the runs list, one run (with its grouped reasons), its throughput,
 * history and live events, and the steering actions. Returns the route's name for the metrics.
 */
export async function serveApi(
  coordinator: Coordinator,
  streams: Set<AbortController>,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
): Promise<string> {
  const token = bearerToken(req);
  const url = new URL(req.url ?? "/", "http://dashboard");
  if (req.method === "GET" && path === "/api/runs") {
    await listRuns(coordinator, res, url, token);
    return "runs";
  }
  const match = RUN_PATH.exec(path);
  if (!match) throw new HttpProblem({ status: 404, message: "There is no such API." });
  const runId = decodeURIComponent(match[1]!);
  if (!RUN_ID.test(runId)) throw new HttpProblem({ status: 404, message: "There is no run with that id." });
  const action = match[2];
  const run: RunRequest = { coordinator, res, runId, token, url };
  if (req.method === "GET") {
    if (action === undefined) {
      await getRun(run);
      return "run";
    }
    if (action === "throughput") {
      await getThroughput(run);
      return "throughput";
    }
    if (action === "history") {
      await getHistory(run);
      return "history";
    }
    if (action === "events") {
      await streamRun(coordinator, streams, res, runId, token);
      return "events";
    }
  }
  if (req.method === "POST" && action === "revert") {
    await revert(run);
    return "revert";
  }
  if (req.method === "POST" && (action === "stop" || action === "resume" || action === "retry")) {
    await steer(run, action);
    return action;
  }
  throw new HttpProblem({ status: 405, message: `${req.method} is not allowed here.` });
}

function bearerToken(req: IncomingMessage): string {
  const header = req.headers.authorization ?? "";
  const token = /^Bearer (\S+)$/.exec(header)?.[1];
  if (!token) {
    throw new HttpProblem({
      status: 401,
      message: "Enter an API key: every call to the coordinator needs one.",
    });
  }
  if (token.length > MAX_TOKEN_LENGTH)
    throw new HttpProblem({ status: 401, message: "That API key is too long to be one of Drover's keys." });
  return token;
}

async function listRuns({ client }: Coordinator, res: ServerResponse, url: URL, token: string) {
  const status = url.searchParams.get("status") ?? "";
  if (status && runStatusFromName(status) === undefined)
    throw new HttpProblem({ status: 400, message: `There is no run status "${status.slice(0, 20)}".` });
  const tenantId = (url.searchParams.get("tenant") ?? "").slice(0, 128);
  const { runs } = await client.listRuns(
    { tenantId, statuses: status ? [runStatusFromName(status)!] : [], pageSize: 100 },
    callOptions(token),
  );
  sendJson(res, 200, { runs: runs.map(runJson) });
}

async function getRun({ coordinator: { client }, res, runId, token }: RunRequest) {
  const [{ run }, { groups }] = await Promise.all([
    client.getRun({ runId }, callOptions(token)),
    client.listNotes({ runId, samples: 5 }, callOptions(token)),
  ]);
  sendJson(res, 200, { run: runJson(run!), notes: groups.map(noteGroupJson) });
}

async function getThroughput({ coordinator: { client }, res, runId, token }: RunRequest) {
  const throughput = await client.getThroughput({ runId, buckets: 120 }, callOptions(token));
  sendJson(res, 200, throughputJson(throughput));
}

/**
 * The run's audit events, newest first: who started, stopped, retried or reverted it (and who
 * tried and was refused). A key that may read the run may read its history.
 */
async function getHistory({ coordinator: { client }, res, runId, token }: RunRequest) {
  const { events } = await client.listAuditEvents({ runId, pageSize: 100 }, callOptions(token));
  sendJson(res, 200, { events: events.map(auditEventJson) });
}

/**
 * The "Revert this run" action: refused (409) while other runs' records depend on what this one
 * created, naming those runs for the page to link, unless force is asked for.
 */
async function revert({ coordinator: { client, address }, res, runId, token, url }: RunRequest) {
  try {
    const { run } = await client.revertRun(
      { runId, force: url.searchParams.get("force") === "1" },
      callOptions(token),
    );
    sendJson(res, 200, { run: runJson(run!) });
  } catch (err) {
    if (!isRpcError(err, Code.FAILED_PRECONDITION)) throw err;
    const runIds = (err.details.run_ids ?? "").split(",").filter((id) => RUN_ID.test(id));
    const revertedBy = RUN_ID.test(err.details.reverted_by ?? "") ? err.details.reverted_by : undefined;
    throw new HttpProblem(problemFor(err, address), {
      ...(runIds.length > 0 ? { runIds } : {}),
      ...(revertedBy ? { revertedBy } : {}),
    });
  }
}

/**
 * Stop, Resume and Retry. A retry with `kind`, `reason` or `id` (repeated) in the query is a
 * re-drive of those rows (the "retry these" button of a reason group); the coordinator checks
 * the filter.
 */
async function steer(
  { coordinator: { client }, res, runId, token, url }: RunRequest,
  action: "stop" | "resume" | "retry",
) {
  const { run } =
    action === "stop"
      ? await client.stopRun({ runId }, callOptions(token))
      : action === "resume"
        ? await client.resumeRun({ runId }, callOptions(token))
        : await client.retryRun(
            {
              runId,
              kind: url.searchParams.get("kind") ?? "",
              reason: url.searchParams.get("reason") ?? "",
              sourceIds: url.searchParams.getAll("id"),
            },
            callOptions(token),
          );
  sendJson(res, 200, { run: runJson(run!) });
}
