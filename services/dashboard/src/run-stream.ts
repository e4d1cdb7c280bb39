import type { ServerResponse } from "node:http";
import { metrics } from "@drover/telemetry";
import { type Coordinator, callOptions } from "./coordinator.js";
import { problemFor } from "./http-errors.js";
import { SECURITY_HEADERS } from "./responses.js";
import { noteGroupJson, runJson } from "./run-json.js";

const liveStreams = metrics.gauge("drover_dashboard_live_streams", "Pages following a run live (WatchRun)");

/**
 * A live page's grouped reasons are read again when the run's skipped or failed rows changed,
 * at most this often (ListNotes groups every note of the run: not a call for every update).
 */
const NOTES_EVERY_MS = 1_000;
const KEEP_ALIVE_MS = 15_000;

/**
 * Server-Sent Events: `run` for every WatchRun update, `notes` when the grouped reasons change,
 * `problem` (a sentence) if the stream fails, and `end` when the run has finished. The stream's
 * abort controller is in `streams` while it lasts, for the dashboard's stop to end it.
 */
export async function streamRun(
  { client, address }: Coordinator,
  streams: Set<AbortController>,
  res: ServerResponse,
  runId: string,
  token: string,
): Promise<void> {
  // Asked first, so that an unknown key or someone else's run is a plain HTTP refusal (the page
  // shows the key form again) rather than an event on a stream already answered 200.
  await client.getRun({ runId }, callOptions(token));
  const abort = new AbortController();
  streams.add(abort);
  liveStreams.inc({});
  // The response closes when the page goes away (or the stream ends): the watch ends with it.
  res.on("close", () => abort.abort());
  res.writeHead(200, {
    ...SECURITY_HEADERS,
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-store",
    connection: "keep-alive",
    "x-accel-buffering": "no",
  });
  const send = (event: string, data: unknown) => {
    if (!res.writableEnded) res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  };
  // WatchRun says nothing while a run waits (parked on a 429, say); proxies close a silent
  // connection, so a comment line goes out now and then.
  const keepAlive = setInterval(() => {
    if (!res.writableEnded) res.write(": keep-alive\n\n");
  }, KEEP_ALIVE_MS);
  let lastNotes = "";
  let lastNoted = -1;
  let notesAt = 0;
  const sendNotes = async () => {
    notesAt = Date.now();
    const { groups } = await client.listNotes({ runId, samples: 5 }, callOptions(token, abort.signal));
    const json = groups.map(noteGroupJson);
    const digest = JSON.stringify(json);
    if (digest !== lastNotes) {
      lastNotes = digest;
      send("notes", json);
    }
  };
  try {
    // A watch has no deadline: it lasts as long as the run or the page.
    for await (const update of client.watchRun(
      { runId },
      { metadata: { authorization: `Bearer ${token}` }, signal: abort.signal },
    )) {
      const view = runJson(update.run!);
      send("run", view);
      const noted = view.progress.reduce((n, p) => n + p.skipped + p.failed, 0);
      if (noted !== lastNoted && Date.now() - notesAt >= NOTES_EVERY_MS) {
        lastNoted = noted;
        await sendNotes();
      }
    }
    await sendNotes();
    send("end", {});
  } catch (err) {
    if (!abort.signal.aborted) send("problem", { message: problemFor(err, address).message });
  } finally {
    clearInterval(keepAlive);
    streams.delete(abort);
    liveStreams.dec({});
    res.end();
  }
}
