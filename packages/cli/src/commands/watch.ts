import { type Run, RunStatus, timestampDate, WatchRunResponseSchema } from "@drover/proto";
import { type CommandContext, one } from "../command-context.js";
import { responseJson } from "../json-output.js";
import { isTerminal, KindClock, progressBlock, runSummary, visibleLength } from "../render.js";

/** Terminal rows a line takes at this width (a line wider than the terminal wraps). */
function rowsTaken(line: string, columns: number | undefined): number {
  return columns ? Math.max(1, Math.ceil(visibleLength(line) / columns)) : 1;
}

/** watch's exit code for the run as the stream left it: 0 it succeeded, 3 it was stopped, else 1. */
function watchExitCode(last: Run): number {
  if (!isTerminal(last.status)) return 1;
  return last.status === RunStatus.SUCCEEDED ? 0 : last.status === RunStatus.STOPPED ? 3 : 1;
}

/** `drover watch`: live progress until the run ends, redrawn in place on a terminal. */
export async function watch({ client, io, json, width, positionals }: CommandContext): Promise<number> {
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
  return watchExitCode(last);
}
