// Following a run live: its Server-Sent Events, read with fetch so that the key travels in a
// header and never in a URL, and read again (backing off) when the connection drops.

import { ApiError, apiKey, runPath } from "./api.js";
import { onError, showProblem } from "./page.js";

let live; // { abort: AbortController } while a run is followed

export const isFollowing = () => Boolean(live);

export function stopFollowing() {
  if (live) live.abort.abort();
  live = undefined;
}

/** Feeds the run's events to `view` (a RunView) until the run ends or the page leaves it. */
export async function follow(runId, view) {
  const abort = new AbortController();
  live = { abort };
  let retry = 1000;
  while (!abort.signal.aborted) {
    try {
      const res = await fetch(runPath(runId, "events"), {
        headers: { authorization: `Bearer ${apiKey()}`, accept: "text/event-stream" },
        signal: abort.signal,
      });
      if (!res.ok) {
        const body = await res.json().catch(() => ({}));
        throw new ApiError(res.status, body.error || `The dashboard answered ${res.status}.`);
      }
      view.setLive(true);
      retry = 1000;
      const ended = await readEvents(res, (event, payload) => deliver(view, event, payload));
      view.setLive(false);
      if (ended) {
        // The run is over: a later Resume or Retry follows it again.
        if (live && live.abort === abort) live = undefined;
        view.awaitVerification();
        return;
      }
    } catch (err) {
      if (abort.signal.aborted) return;
      view.setLive(false);
      if (err instanceof ApiError && err.status < 500) return onError(err);
      showProblem(`Lost the live updates (${err.message}); trying again.`);
    }
    await new Promise((r) => setTimeout(r, retry));
    retry = Math.min(retry * 2, 15000);
  }
}

/** What each event does to the page. */
function deliver(view, event, payload) {
  if (event === "run") {
    view.render(payload);
    view.refreshThroughput(5000);
  } else if (event === "notes") view.renderNotes(payload);
  else if (event === "problem") showProblem(payload.message);
  else if (event === "end") {
    view.refreshThroughput();
    view.refreshHistory();
  }
}

/** Hands each event of the stream to `onEvent` until it closes; says whether it sent `end`. */
async function readEvents(res, onEvent) {
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let ended = false;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return ended;
    buffer += value;
    for (let at = buffer.indexOf("\n\n"); at >= 0; at = buffer.indexOf("\n\n")) {
      const chunk = buffer.slice(0, at);
      buffer = buffer.slice(at + 2);
      let event = "message";
      let data = "";
      for (const line of chunk.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (event === "end") ended = true;
      onEvent(event, data ? JSON.parse(data) : {});
    }
  }
}
