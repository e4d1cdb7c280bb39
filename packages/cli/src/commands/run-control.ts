import {
  CompleteRunResponseSchema,
  ResumeRunResponseSchema,
  RetryRunResponseSchema,
  RevertRunResponseSchema,
  type Run,
  RunStatus,
  StopRunResponseSchema,
} from "@drover/proto";
import { type CommandContext, type Flags, one, UsageError } from "../command-context.js";
import { statusName } from "../render.js";

// The commands that change the course of a run the coordinator already has.

/** The line stop, resume and retry print: the state the run is in now. */
function runIsNow(runId: string, run: Run | undefined): string {
  return `run ${runId} is ${statusName(run?.status ?? RunStatus.UNSPECIFIED)}`;
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

/** `drover stop`: cancel pending tasks; running ones commit their window and end. */
export async function stop({ client, positionals, print }: CommandContext): Promise<number> {
  const runId = one(positionals, "run id");
  const response = await client.stopRun({ runId });
  print(runIsNow(runId, response.run), StopRunResponseSchema, response);
  return 0;
}

/** `drover resume`: re-arm a stopped run. */
export async function resume({ client, positionals, print }: CommandContext): Promise<number> {
  const runId = one(positionals, "run id");
  const response = await client.resumeRun({ runId });
  print(runIsNow(runId, response.run), ResumeRunResponseSchema, response);
  return 0;
}

/** `drover retry`: re-arm a failed run's failed tasks, or re-drive a finished run's rows. */
export async function retry({ client, flags, positionals, print }: CommandContext): Promise<number> {
  const runId = one(positionals, "run id");
  const response = await client.retryRun({ runId, ...redriveFlags(flags) });
  print(runIsNow(runId, response.run), RetryRunResponseSchema, response);
  return 0;
}

/** `drover complete`: cut a follow run over (one final pass, then it finishes). */
export async function complete({ client, positionals, print }: CommandContext): Promise<number> {
  const runId = one(positionals, "run id");
  const response = await client.completeRun({ runId });
  print(
    `run ${runId} is cutting over: one final pass, then it finishes (drover watch ${runId})`,
    CompleteRunResponseSchema,
    response,
  );
  return 0;
}

/** `drover revert`: remove what a finished run created, by a revert run of its own. */
export async function revert({ client, flags, positionals, print }: CommandContext): Promise<number> {
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
