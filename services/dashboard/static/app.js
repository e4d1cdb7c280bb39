// The run page. Every string from the server goes into the DOM as text (textContent, attribute
// values through setAttribute), never as markup: a reason or a tenant name cannot become a script.

const KEY_STORE = "drover.apiKey";
/** The status words, from /vocabulary.js (served from the definition every layer reads). */
const VOCABULARY = window.DROVER_VOCABULARY;
const main = document.getElementById("main");
const problemBox = document.getElementById("problem");
const where = document.getElementById("where");
const forgetKey = document.getElementById("forget-key");

/** Elements by hand: h("td", { class: "num" }, "12"). Strings and numbers become text nodes. */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    // Through the CSSOM: the page's content security policy refuses inline style attributes.
    else if (k === "style") Object.assign(el.style, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}
function svg(tag, attrs, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  append(el, children);
  return el;
}
function append(el, children) {
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

const apiKey = () => sessionStorage.getItem(KEY_STORE);

function showProblem(message) {
  problemBox.textContent = message;
  problemBox.hidden = !message;
}

class ApiError extends Error {
  constructor(status, message, body = {}) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

async function api(method, path) {
  const res = await fetch(path, {
    method,
    headers: { authorization: `Bearer ${apiKey()}`, accept: "application/json" },
  });
  let body = {};
  try {
    body = await res.json();
  } catch {
    // An empty or broken body: the status says enough.
  }
  if (!res.ok) {
    if (res.status === 401) sessionStorage.removeItem(KEY_STORE);
    throw new ApiError(res.status, body.error || `The dashboard answered ${res.status}.`, body);
  }
  return body;
}

const fmt = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));
const when = (iso) => (iso ? new Date(iso).toLocaleString() : "–");

function duration(seconds) {
  if (!Number.isFinite(seconds) || seconds < 0) return "–";
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

/** A wait as a person says it, as the CLI does: "45 s", "12 m", "3 h 12 m", "2 d 5 h". */
function waitText(seconds) {
  const s = Math.max(1, Math.ceil(seconds));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} m`;
  const hours = Math.floor(m / 60);
  if (hours < 24) return m % 60 ? `${hours} h ${m % 60} m` : `${hours} h`;
  const days = Math.floor(hours / 24);
  return hours % 24 ? `${days} d ${hours % 24} h` : `${days} d`;
}

/** The time of day in the reader's time zone, with the date in front when it is not today's. */
function localTime(iso, timeZone) {
  const at = new Date(iso);
  if (timeZone) {
    // A day's reset, said in the account's own time zone; the date only when it is over a day off.
    const time = at.toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit", timeZone });
    const within = at.getTime() - Date.now() < 86_400_000;
    return `${within ? time : `${at.toLocaleDateString([], { timeZone })} ${time}`} ${timeZone}`;
  }
  const time = at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  return at.toDateString() === new Date().toDateString() ? time : `${at.toLocaleDateString()} ${time}`;
}

function phaseText(run) {
  const n = Math.min(run.currentPhase + 1, run.phases.length);
  const kinds = run.phases[run.currentPhase];
  return kinds
    ? `Phase ${n} of ${run.phases.length}: ${kinds.join(", ")}`
    : `All ${run.phases.length} phases done`;
}

// ---- the API key -------------------------------------------------------------------------------

function keyForm(next) {
  where.textContent = "";
  forgetKey.hidden = true;
  const input = h("input", {
    type: "password",
    id: "api-key",
    name: "api-key",
    autocomplete: "off",
    placeholder: "drv_…",
    "aria-label": "API key",
  });
  const form = h(
    "form",
    {
      class: "panel key-form",
      id: "key-form",
      onsubmit: (e) => {
        e.preventDefault();
        const key = input.value.trim();
        if (!key) return showProblem("Enter an API key.");
        sessionStorage.setItem(KEY_STORE, key);
        showProblem("");
        next();
      },
    },
    h("h1", {}, "Enter an API key"),
    h(
      "p",
      { class: "notice" },
      "The page calls the coordinator with your key; it stays in this tab (sessionStorage) and is forgotten when the tab closes. A tenant key shows that tenant's runs only.",
    ),
    input,
    h("button", { type: "submit", id: "use-key" }, "Use this key"),
  );
  main.replaceChildren(form);
  input.focus();
}

forgetKey.addEventListener("click", () => {
  sessionStorage.removeItem(KEY_STORE);
  stopLive();
  route();
});

// ---- list of runs ------------------------------------------------------------------------------

let listTimer;

async function showRuns() {
  where.textContent = "Runs";
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const status = params.get("status") || "";
  const select = h(
    "select",
    {
      id: "status-filter",
      "aria-label": "Status",
      onchange: () => {
        location.hash = select.value ? `#/?status=${encodeURIComponent(select.value)}` : "#/";
      },
    },
    ["", ...VOCABULARY.runStatuses].map((s) =>
      h("option", { value: s, selected: s === status }, s || "any status"),
    ),
  );
  const body = h("tbody", {});
  main.replaceChildren(
    h(
      "section",
      { class: "panel" },
      h("h1", {}, "Runs"),
      h("div", { class: "filters" }, h("label", {}, "Status ", select)),
      h(
        "table",
        { id: "runs" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", {}, "Run"),
            h("th", {}, "Tenant"),
            h("th", {}, "Source"),
            h("th", {}, "Status"),
            h("th", {}, "Phase"),
            h("th", { class: "num" }, "Rows"),
            h("th", {}, "Created"),
          ),
        ),
        body,
      ),
    ),
  );
  const load = async () => {
    const { runs } = await api("GET", `/api/runs${status ? `?status=${encodeURIComponent(status)}` : ""}`);
    body.replaceChildren(
      ...(runs.length === 0
        ? [h("tr", {}, h("td", { colspan: 7, class: "notice" }, "No runs to show for this key."))]
        : runs.map((r) =>
            h(
              "tr",
              { "data-run-id": r.id },
              h("td", { class: "mono" }, h("a", { href: `#/runs/${encodeURIComponent(r.id)}` }, r.id)),
              h("td", {}, r.tenantId),
              h("td", {}, `${r.source}:${r.sourceAccount}`),
              h("td", {}, h("span", { class: `status ${r.status}` }, r.status)),
              h("td", {}, `${Math.min(r.currentPhase + 1, r.phases.length)} of ${r.phases.length}`),
              h("td", { class: "num" }, fmt(r.rows)),
              h("td", {}, when(r.createdAt)),
            ),
          )),
    );
  };
  await load();
  listTimer = setInterval(() => load().catch(onError), 5000);
}

// ---- one run -----------------------------------------------------------------------------------

let live; // { abort: AbortController }
let shownRun; // the RunView on the page, if any

function stopLive() {
  clearInterval(listTimer);
  if (live) live.abort.abort();
  live = undefined;
  shownRun = undefined;
}

async function showRun(runId) {
  where.textContent = `Run ${runId}`;
  const { run, notes } = await api("GET", `/api/runs/${encodeURIComponent(runId)}`);
  const view = new RunView(runId);
  shownRun = view;
  main.replaceChildren(view.root);
  view.render(run);
  view.renderNotes(notes);
  await view.refreshThroughput();
  view.refreshHistory();
  follow(runId, view);
}

/** Reads the SSE stream with fetch, so the key travels in a header and never in a URL. */
async function follow(runId, view) {
  const abort = new AbortController();
  live = { abort };
  let retry = 1000;
  while (!abort.signal.aborted) {
    try {
      const res = await fetch(`/api/runs/${encodeURIComponent(runId)}/events`, {
        headers: { authorization: `Bearer ${apiKey()}`, accept: "text/event-stream" },
        signal: abort.signal,
      });
      if (!res.ok) {
        const body = await res.json().catch(() => ({}));
        throw new ApiError(res.status, body.error || `The dashboard answered ${res.status}.`);
      }
      view.setLive(true);
      retry = 1000;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      let ended = false;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
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
          const payload = data ? JSON.parse(data) : {};
          if (event === "run") {
            view.render(payload);
            view.refreshThroughput(5000);
          } else if (event === "notes") view.renderNotes(payload);
          else if (event === "problem") showProblem(payload.message);
          else if (event === "end") {
            ended = true;
            view.refreshThroughput();
            view.refreshHistory();
          }
        }
      }
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

class RunView {
  constructor(runId) {
    this.runId = runId;
    this.throughput = null; // { bucketSeconds, points: [{ at, rows }] }
    this.throughputAt = 0;
    this.title = h("h1", {}, `Run ${runId}`);
    this.status = h("span", { class: "status", id: "run-status" });
    this.liveBadge = h("span", { class: "notice", id: "live" });
    this.meta = h("p", { class: "notice", id: "run-meta" });
    this.phase = h("p", { id: "phase" });
    this.phaseList = h("ol", { class: "phases", id: "phases" });
    this.error = h("p", { class: "problem", id: "run-error", hidden: true });
    this.budgetWait = h("p", { class: "notice", id: "budget-wait", hidden: true });
    this.eta = h("p", { class: "notice", id: "run-eta", hidden: true });
    this.follow = h("p", { class: "notice", id: "run-follow", hidden: true });
    this.revertLine = h("p", { class: "notice", id: "run-revert", hidden: true });
    this.learned = h("dl", { class: "facts", id: "run-facts", hidden: true });
    this.buttons = {
      stop: h(
        "button",
        { type: "button", id: "stop", class: "danger", onclick: () => this.steer("stop") },
        "Stop",
      ),
      resume: h("button", { type: "button", id: "resume", onclick: () => this.steer("resume") }, "Resume"),
      retry: h("button", { type: "button", id: "retry", onclick: () => this.steer("retry") }, "Retry"),
      revert: h(
        "button",
        { type: "button", id: "revert", class: "danger", onclick: () => this.askRevert() },
        "Revert this run…",
      ),
    };
    // "Revert this run": a confirmation first, saying what goes and what stays; a refusal names
    // the later runs whose records depend on this one's, and force is offered then.
    this.revertForce = h("input", { type: "checkbox", id: "revert-force" });
    this.revertRefusal = h("p", { class: "problem", id: "revert-refusal", hidden: true });
    this.revertRuns = h("ul", { id: "revert-runs" });
    this.revertConfirm = h(
      "section",
      { class: "panel", id: "revert-confirm", hidden: true },
      h("h2", {}, "Revert this run?"),
      h(
        "p",
        {},
        "Every record this run created is removed from the product, children before parents, as a revert run of its own (it can be stopped and resumed). Records it matched, which were already there, stay as they are. A record that cannot go stays, with a note saying why.",
      ),
      this.revertRefusal,
      this.revertRuns,
      h(
        "label",
        {},
        this.revertForce,
        " Force: clear the links other runs' records have to these records (a record that cannot exist without its parent goes with it); each is noted on the revert run",
      ),
      h(
        "div",
        { class: "actions" },
        h(
          "button",
          { type: "button", id: "revert-go", class: "danger", onclick: () => this.revert() },
          "Revert",
        ),
        h("button", { type: "button", id: "revert-cancel", onclick: () => this.closeRevert() }, "Cancel"),
      ),
    );
    // A revert run's own progress: per kind what it removed, found gone and left in place.
    this.revertSummary = h("p", { id: "revert-summary" });
    this.revertRows = h("tbody", {});
    this.revertPanel = h(
      "section",
      { class: "panel", id: "revert-progress", hidden: true },
      h("h2", {}, "Revert: records removed, children first"),
      this.revertSummary,
      h(
        "table",
        { id: "revert-kinds" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", {}, "Kind"),
            h("th", {}, ""),
            h("th", { class: "num" }, "Removed"),
            h("th", { class: "num" }, "Already gone"),
            h("th", { class: "num" }, "Could not remove"),
            h("th", { class: "num" }, "Created by the run"),
          ),
        ),
        this.revertRows,
      ),
      h(
        "p",
        { class: "notice" },
        "Why a record could not be removed is under Reasons, grouped per kind and reason.",
      ),
    );
    this.kinds = h("div", { id: "kinds" });
    this.tasks = h("dl", { class: "facts", id: "tasks" });
    this.budget = h("dl", { class: "facts", id: "budget" });
    this.chart = h("div", { id: "throughput" });
    this.verificationSummary = h("p", { id: "verification-result" });
    this.verificationRows = h("tbody", {});
    this.verificationProblems = h("ul", { id: "verification-mismatches" });
    this.verificationPanel = h(
      "section",
      { class: "panel", id: "verification", hidden: true },
      h("h2", {}, "Verification"),
      this.verificationSummary,
      h(
        "table",
        { id: "verification-kinds" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", {}, "Kind"),
            h("th", { class: "num" }, "In the source"),
            h("th", { class: "num" }, "In the ledger"),
            h("th", { class: "num" }, "Failed"),
            h("th", { class: "num" }, "Sampled"),
            h("th", { class: "num" }, "Mismatches"),
          ),
        ),
        this.verificationRows,
      ),
      this.verificationProblems,
    );
    this.dryRunSummary = h("p", { id: "dry-run-cost" });
    this.dryRunRows = h("tbody", {});
    this.dryRunReasons = h("ul", { id: "dry-run-reasons" });
    this.dryRunPanel = h(
      "section",
      { class: "panel", id: "dry-run", hidden: true },
      h("h2", {}, "Dry run: what a real run would do"),
      h("p", { class: "notice" }, "Nothing was written to the product or the ledger."),
      h(
        "table",
        { id: "dry-run-kinds" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            h("th", {}, "Kind"),
            h("th", { class: "num" }, "Would create"),
            h("th", { class: "num" }, "Would match"),
            h("th", {}, "Matched by"),
            h("th", { class: "num" }, "Would skip"),
            h("th", { class: "num" }, "Would fail"),
            h("th", { class: "num" }, "Requests"),
            h("th", { class: "num" }, "Tokens"),
          ),
        ),
        this.dryRunRows,
      ),
      this.dryRunReasons,
      this.dryRunSummary,
    );
    this.notes = h("tbody", {});
    this.history = h("tbody", {});
    this.root = h(
      "div",
      {},
      h(
        "section",
        { class: "panel" },
        h("p", {}, h("a", { href: "#/" }, "← all runs")),
        this.title,
        h("p", {}, this.status, " ", this.liveBadge),
        this.meta,
        this.phase,
        this.phaseList,
        this.learned,
        this.budgetWait,
        this.eta,
        this.follow,
        this.revertLine,
        this.error,
        h(
          "div",
          { class: "actions" },
          this.buttons.stop,
          this.buttons.resume,
          this.buttons.retry,
          this.buttons.revert,
        ),
      ),
      this.revertConfirm,
      this.revertPanel,
      h(
        "section",
        { class: "panel", id: "kinds-panel" },
        h("h2", {}, "Rows by kind"),
        h(
          "div",
          { class: "legend", id: "legend" },
          h("span", { class: "imported", title: "created by this run" }, "imported"),
          h(
            "span",
            { class: "matched", title: "the product already had an equivalent record, which was reused" },
            "matched",
          ),
          h(
            "span",
            { class: "already", title: "an earlier run (or attempt) had imported it" },
            "already here",
          ),
          h("span", { class: "skipped", title: "kept as a placeholder, with a reason" }, "skipped"),
          h("span", { class: "failed", title: "not imported, with a reason" }, "failed"),
        ),
        h(
          "p",
          { class: "notice" },
          "Matched: the product already had the record (e.g. a contact with the same email) and it was reused. Already here: an earlier run, or an earlier attempt of this one, had imported it.",
        ),
        this.kinds,
      ),
      this.dryRunPanel,
      this.verificationPanel,
      h(
        "div",
        { class: "grid" },
        h("section", { class: "panel" }, h("h2", {}, "Tasks"), this.tasks),
        h("section", { class: "panel" }, h("h2", {}, "Source budget"), this.budget),
      ),
      h("section", { class: "panel" }, h("h2", {}, "Throughput (rows/s)"), this.chart),
      h(
        "section",
        { class: "panel" },
        h("h2", {}, "Reasons"),
        h(
          "table",
          { id: "notes" },
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              h("th", { class: "num" }, "Count"),
              h("th", {}, "Level"),
              h("th", {}, "Kind"),
              h("th", {}, "Reason"),
              h("th", {}, "e.g. source ids"),
              h("th", {}, ""),
            ),
          ),
          this.notes,
        ),
      ),
      h(
        "section",
        { class: "panel" },
        h("h2", {}, "History"),
        h(
          "table",
          { id: "history" },
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              h("th", {}, "When"),
              h("th", {}, "Who"),
              h("th", {}, "What"),
              h("th", {}, "Outcome"),
              h("th", {}, "From"),
            ),
          ),
          this.history,
        ),
      ),
    );
  }

  setLive(on) {
    this.liveBadge.textContent = on ? "● live" : "";
  }

  async steer(action) {
    for (const b of Object.values(this.buttons)) b.disabled = true;
    try {
      const { run } = await api("POST", `/api/runs/${encodeURIComponent(this.runId)}/${action}`);
      showProblem("");
      this.render(run);
      if (action !== "stop" && !live) follow(this.runId, this);
    } catch (err) {
      onError(err);
      if (this.last) this.render(this.last);
    } finally {
      // Refused or not, the attempt is in the run's history now.
      this.refreshHistory();
    }
  }

  /** The run's audit events: who started, stopped, retried or reverted it, and who was refused. */
  async refreshHistory() {
    let events;
    try {
      ({ events } = await api("GET", `/api/runs/${encodeURIComponent(this.runId)}/history`));
    } catch {
      // The history is a footnote to the run: a failure to read it does not replace the page.
      return;
    }
    this.history.replaceChildren(
      ...(events.length === 0
        ? [h("tr", {}, h("td", { colspan: 5, class: "notice" }, "Nothing recorded."))]
        : events.map((e) => {
            const details = Object.entries(e.details)
              .map(([k, v]) => `${k}=${v}`)
              .join(" ");
            return h(
              "tr",
              { "data-outcome": e.outcome },
              h("td", {}, when(e.at)),
              h("td", { class: "mono" }, e.who),
              h("td", {}, details ? `${e.action} (${details})` : e.action),
              h("td", {}, e.outcome === "ok" ? "ok" : `${e.outcome}: ${e.message}`),
              h("td", { class: "mono" }, e.from),
            );
          })),
    );
  }

  render(run) {
    this.last = run;
    this.status.textContent = run.status;
    this.status.setAttribute("class", `status ${run.status}`);
    this.status.setAttribute("data-status", run.status);
    this.meta.textContent = `Tenant ${run.tenantId} · ${run.source}:${run.sourceAccount} · started ${when(run.startedAt || run.createdAt)}${run.finishedAt ? ` · finished ${when(run.finishedAt)}` : ""}`;
    this.phase.textContent = phaseText(run);
    this.phaseList.replaceChildren(
      ...run.phases.map((kinds, i) =>
        h(
          "li",
          { class: i < run.currentPhase ? "done" : i === run.currentPhase ? "current" : "" },
          `${i + 1}. ${kinds.join(", ")}`,
        ),
      ),
    );
    // A parked run may not change for hours: the wait is counted down here, not only on an update.
    const wait = run.budgetWait;
    const showWait = () => {
      const left = wait ? (Date.parse(wait.until) - Date.now()) / 1000 : 0;
      this.budgetWait.textContent =
        left > 0 ? `${wait.text} ${localTime(wait.until, wait.timeZone)} (in ${waitText(left)})` : "";
      this.budgetWait.hidden = !(left > 0);
      if (left <= 0 || shownRun !== this) clearInterval(this.waitTimer);
    };
    clearInterval(this.waitTimer);
    if (wait) this.waitTimer = setInterval(showWait, 30_000);
    showWait();
    // Against the source's budget: the work left, paced by its burst window and daily resets.
    const eta = run.eta;
    this.eta.textContent = eta
      ? `Ends in ${eta.text} (budget: ${fmt(eta.requests)} requests, ${fmt(eta.tokens)} tokens${
          eta.dailyResets > 0 ? `, ${eta.dailyResets} daily reset${eta.dailyResets === 1 ? "" : "s"}` : ""
        })`
      : "";
    this.eta.hidden = !eta;
    const follow = run.follow;
    if (follow) {
      const lag =
        follow.replicationLagSeconds === null
          ? "no pass finished yet"
          : `${fmt(follow.replicationLagSeconds)} s`;
      const recent = follow.passes
        .filter((p) => p.finishedAt)
        .slice(-5)
        .map(
          (p) =>
            `pass ${p.index}: ${fmt(p.changes)}${p.deletions > 0 ? ` (${fmt(p.deletions)} deleted)` : ""}`,
        )
        .join(", ");
      const feed =
        follow.feed === "webhooks"
          ? ` · webhooks, reconcile every ${fmt(Math.max(follow.intervalSeconds, follow.reconcileSeconds))} s, last event ${
              follow.lastEventAt ? when(follow.lastEventAt) : "none yet"
            }`
          : follow.feed === "polling"
            ? ` · polling (${follow.feedReason})`
            : "";
      this.follow.textContent = `Following the source every ${fmt(follow.intervalSeconds)} s${
        follow.cutoverAt ? `, cutover asked ${when(follow.cutoverAt)}` : " until cutover"
      } · replication lag ${lag}${feed}${recent ? ` · changes per pass: ${recent}` : ""}`;
    }
    this.follow.hidden = !follow;
    this.error.textContent = run.error ? `Error: ${run.error}` : "";
    this.error.hidden = !run.error;
    this.buttons.stop.disabled = !run.can.stop;
    this.buttons.resume.disabled = !run.can.resume;
    this.buttons.retry.disabled = !run.can.retry;
    this.buttons.revert.hidden = !run.can.revert;
    if (!run.can.revert) this.revertConfirm.hidden = true;
    this.renderRevert(run);
    for (const b of this.notes.querySelectorAll("button.redrive")) b.disabled = !run.can.redrive;

    const rowsOf = (p) => p.imported + p.matched + p.alreadyHere + p.skipped + p.failed;
    const most = Math.max(1, ...run.progress.map(rowsOf));
    this.kinds.replaceChildren(
      ...run.progress.map((p) => {
        const total = rowsOf(p);
        const seg = (cls, n, label) =>
          n > 0
            ? h("span", { class: cls, style: { width: `${(100 * n) / most}%` }, title: `${fmt(n)} ${label}` })
            : null;
        const taskShare = p.tasksTotal > 0 ? (100 * p.tasksDone) / p.tasksTotal : 0;
        return h(
          "div",
          { class: "kind", "data-kind": p.kind },
          h("div", { class: "name" }, p.kind),
          h(
            "div",
            {},
            h(
              "div",
              { class: "bar", role: "img", "aria-label": `${p.kind}: ${fmt(total)} rows` },
              seg("imported", p.imported, "imported"),
              seg("matched", p.matched, "matched"),
              seg("already", p.alreadyHere, "already here"),
              seg("skipped", p.skipped, "skipped"),
              seg("failed", p.failed, "failed"),
            ),
            h(
              "div",
              { class: "tasks-bar", title: `${p.tasksDone} of ${p.tasksTotal} tasks done` },
              h("span", { style: { width: `${taskShare}%` } }),
            ),
          ),
          h(
            "div",
            { class: "counts" },
            `${fmt(p.imported)} imported · ${fmt(p.matched)} matched · ${fmt(p.alreadyHere)} already here · ${fmt(p.skipped)} skipped · ${fmt(p.failed)} failed · tasks ${p.tasksDone}/${p.tasksTotal}`,
          ),
        );
      }),
    );

    const t = run.tasks;
    const facts = (dl, pairs) =>
      dl.replaceChildren(...pairs.flatMap(([k, v, id]) => [h("dt", {}, k), h("dd", id ? { id } : {}, v)]));
    facts(this.tasks, [
      ["done", fmt(t.succeeded), "tasks-done"],
      ["in flight", fmt(t.running), "tasks-running"],
      ["waiting", fmt(t.pending)],
      ["failed", fmt(t.failed)],
      ["cancelled", fmt(t.cancelled)],
    ]);
    facts(
      this.learned,
      run.facts.map((f) => [f.key, f.value]),
    );
    this.learned.hidden = run.facts.length === 0;
    // The server labels each fact with its unit and period and leaves out what does not apply.
    const b = run.budget;
    facts(
      this.budget,
      b
        ? b.facts.map((f) => [f.label, f.at ? `${f.text} ${when(f.at)}` : f.text])
        : [["budget", "no request leased on this account yet"]],
    );

    this.renderVerification(run);
    this.renderDryRun(run);
    this.title.textContent = `${run.isDryRun ? "Dry run" : run.revert?.reverts ? "Revert run" : "Run"} ${run.id}`;
    this.drawChart(run);
  }

  /** What a revert run reverts and how far it got; on a reverted run, which run reverted it. */
  renderRevert(run) {
    const r = run.revert;
    const link = (id) => h("a", { href: `#/runs/${encodeURIComponent(id)}`, class: "mono" }, id);
    this.revertLine.replaceChildren(
      ...(r?.reverts
        ? ["Revert of run ", link(r.reverts), r.force ? " (forced: other runs' links cleared)" : ""]
        : r?.revertedBy
          ? ["Reverted by run ", link(r.revertedBy), ": its records were removed from the product."]
          : []),
    );
    this.revertLine.hidden = !r;
    const reverting = Boolean(r?.reverts);
    this.revertPanel.hidden = !reverting;
    // A revert run imports nothing: its rows by kind would all be zero.
    this.root.querySelector("#kinds-panel").hidden = reverting;
    if (!reverting) return;
    const total = r.kinds.reduce((n, k) => n + k.total, 0);
    const gone = r.kinds.reduce((n, k) => n + k.gone, 0);
    this.revertSummary.textContent = `${fmt(r.removed)} of ${fmt(total)} records removed${
      gone > 0 ? `, ${fmt(gone)} already gone` : ""
    }, ${fmt(r.kept)} could not be removed.`;
    this.revertRows.replaceChildren(
      ...r.kinds.map((k) => {
        const share = (n) => (k.total > 0 ? `${(100 * n) / k.total}%` : "0%");
        return h(
          "tr",
          { "data-kind": k.kind },
          h("td", {}, k.kind),
          h(
            "td",
            {},
            h(
              "div",
              {
                class: "bar",
                role: "img",
                "aria-label": `${k.kind}: ${fmt(k.removed)} of ${fmt(k.total)} removed`,
              },
              k.removed > 0 ? h("span", { class: "imported", style: { width: share(k.removed) } }) : null,
              k.gone > 0 ? h("span", { class: "already", style: { width: share(k.gone) } }) : null,
              k.kept > 0 ? h("span", { class: "failed", style: { width: share(k.kept) } }) : null,
            ),
          ),
          h("td", { class: "num" }, fmt(k.removed)),
          h("td", { class: "num" }, fmt(k.gone)),
          h("td", { class: "num" }, fmt(k.kept)),
          h("td", { class: "num" }, fmt(k.total)),
        );
      }),
    );
  }

  askRevert() {
    this.revertRefusal.hidden = true;
    this.revertRuns.replaceChildren();
    this.revertConfirm.hidden = false;
    this.revertConfirm.scrollIntoView({ block: "nearest" });
  }

  closeRevert() {
    this.revertConfirm.hidden = true;
  }

  /**
   * Starts the revert and opens the revert run's page. Refused, the coordinator's sentence stays
   * in the confirmation with links to the runs it names; the operator may then tick force.
   */
  async revert() {
    const go = this.revertConfirm.querySelector("#revert-go");
    go.disabled = true;
    try {
      const force = this.revertForce.checked ? "?force=1" : "";
      const { run } = await api("POST", `/api/runs/${encodeURIComponent(this.runId)}/revert${force}`);
      showProblem("");
      location.hash = `#/runs/${encodeURIComponent(run.id)}`;
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 409) return onError(err);
      this.revertRefusal.textContent = err.message;
      this.revertRefusal.hidden = false;
      const named = [...(err.body.runIds || []), ...(err.body.revertedBy ? [err.body.revertedBy] : [])];
      this.revertRuns.replaceChildren(
        ...named.map((id) =>
          h("li", {}, h("a", { href: `#/runs/${encodeURIComponent(id)}`, class: "mono" }, id)),
        ),
      );
    } finally {
      go.disabled = false;
      this.refreshHistory();
    }
  }

  /**
   * A run's verification comes after its end (a worker checks it against the source): the page
   * reads the run again now and then until it is there, while the page still shows this run.
   */
  async awaitVerification() {
    for (let i = 0; i < 100 && shownRun === this && this.last?.verificationPending; i++) {
      await new Promise((r) => setTimeout(r, i === 0 ? 500 : 3000));
      if (shownRun !== this || live) return;
      try {
        const { run } = await api("GET", `/api/runs/${encodeURIComponent(this.runId)}`);
        if (shownRun === this && !live) this.render(run);
      } catch (err) {
        return onError(err);
      }
    }
  }

  /** A dry run's report: per kind what a real run would do, why rows would skip or fail, what it would cost. */
  renderDryRun(run) {
    const d = run.dryRun;
    this.dryRunPanel.hidden = !d;
    if (!d) return;
    this.dryRunRows.replaceChildren(
      ...d.kinds.map((k) =>
        h(
          "tr",
          { "data-kind": k.kind },
          h("td", {}, k.kind),
          h("td", { class: "num" }, fmt(k.wouldCreate)),
          h("td", { class: "num" }, fmt(k.wouldMatch)),
          h("td", {}, k.matchedBy.map((m) => `${m.rule} ${fmt(m.count)}`).join(", ")),
          h("td", { class: "num" }, fmt(k.wouldSkip)),
          h("td", { class: "num" }, fmt(k.wouldFail)),
          h("td", { class: "num" }, fmt(k.requests)),
          h("td", { class: "num" }, fmt(k.tokens)),
        ),
      ),
    );
    const missing = (k) =>
      k.missingParents.length === 0
        ? []
        : [
            h(
              "li",
              {},
              `${k.kind} would skip for missing parents: ${k.missingParents
                .map((m) => `${m.parent === "none" ? "no parent given" : m.parent} ${fmt(m.count)}`)
                .join(", ")}`,
            ),
          ];
    this.dryRunReasons.replaceChildren(
      ...d.kinds.flatMap((k) => [
        ...missing(k),
        ...k.reasons.map((r) =>
          h(
            "li",
            {},
            `${k.kind} ${r.level === "error" ? "would fail" : "would skip"} ${fmt(r.count)}: ${r.reason}${
              r.samples.length > 0 ? ` (e.g. ${r.samples.join(", ")})` : ""
            }`,
          ),
        ),
      ]),
    );
    this.dryRunSummary.textContent = `A real run would cost ${fmt(d.requests)} requests, ${fmt(d.tokens)} tokens: ${d.durationText} at the account's budget${
      d.dailyResets > 0 ? `, ${d.dailyResets} daily reset${d.dailyResets === 1 ? "" : "s"}` : ""
    }.`;
  }

  /** The finished run's check against its source; hidden while the run goes. */
  renderVerification(run) {
    const v = run.verification;
    this.verificationPanel.hidden = !v && !run.verificationPending;
    this.verificationRows.replaceChildren();
    this.verificationProblems.replaceChildren();
    if (!v) {
      this.verificationSummary.setAttribute("class", "notice");
      this.verificationSummary.textContent =
        "Not verified yet: a worker checks the finished run against its source shortly.";
      return;
    }
    this.verificationSummary.setAttribute("class", `verification ${v.ok ? "ok" : "problem"}`);
    this.verificationSummary.textContent = `${
      v.ok
        ? "Passed: every kind's rows are accounted for, and every sampled row matches its source."
        : v.error
          ? `Could not finish: ${v.error}`
          : "Found problems (listed below)."
    }${v.verifiedAt ? ` Verified ${when(v.verifiedAt)}.` : ""}`;
    this.verificationRows.replaceChildren(
      ...v.kinds.map((k) =>
        h(
          "tr",
          { "data-kind": k.kind },
          h("td", {}, k.kind),
          h("td", { class: "num" }, fmt(k.sourceCount)),
          h("td", { class: "num" }, fmt(k.ledgerCount)),
          h("td", { class: "num" }, fmt(k.failedCount)),
          h("td", { class: "num" }, fmt(k.sampled)),
          h("td", { class: "num" }, fmt(k.mismatches.length)),
        ),
      ),
    );
    this.verificationProblems.replaceChildren(
      ...v.kinds.flatMap((k) => k.mismatches.map((m) => h("li", {}, `${k.kind}: ${m}`))),
    );
  }

  /** Reads the run's rows over time again, at most every `minMs`. */
  async refreshThroughput(minMs = 0) {
    if (Date.now() - this.throughputAt < minMs) return;
    this.throughputAt = Date.now();
    try {
      this.throughput = await api("GET", `/api/runs/${encodeURIComponent(this.runId)}/throughput`);
      if (this.last) this.drawChart(this.last);
    } catch (err) {
      onError(err);
    }
  }

  /**
   * Rows/s over the whole run, from the rows it committed per time bucket, as an inline SVG line.
   * A live run's last bucket is still filling: its rate counts the time it has had.
   */
  drawChart(run) {
    const t = this.throughput;
    const points = [];
    if (t) {
      t.points.forEach((p, i) => {
        const at = Date.parse(p.at);
        const last = i === t.points.length - 1;
        // As of when the counts were read, not of now: the bucket's rows are those of that moment.
        const seconds =
          last && !run.finishedAt
            ? Math.min(t.bucketSeconds, (this.throughputAt - at) / 1000)
            : t.bucketSeconds;
        if (seconds > 0) points.push({ t: at + seconds * 1000, rate: p.rows / seconds });
      });
    }
    const W = 600;
    const H = 160;
    const pad = { l: 44, r: 8, t: 8, b: 20 };
    const root = svg("svg", {
      class: "chart",
      viewBox: `0 0 ${W} ${H}`,
      preserveAspectRatio: "none",
      role: "img",
      "aria-label": "Rows per second over time",
    });
    root.append(svg("line", { class: "axis", x1: pad.l, y1: H - pad.b, x2: W - pad.r, y2: H - pad.b }));
    if (points.length < 2) {
      const active = VOCABULARY.liveRunStatuses.includes(run.status);
      root.append(
        svg(
          "text",
          { x: pad.l, y: H / 2 },
          active
            ? "Measuring: the chart fills in as the run commits rows."
            : `${fmt(run.rows)} rows; the run is ${run.status}.`,
        ),
      );
      this.chart.replaceChildren(root);
      return;
    }
    const t0 = points[0].t;
    const t1 = points[points.length - 1].t;
    const max = Math.max(1, ...points.map((p) => p.rate));
    const x = (t) => pad.l + ((W - pad.l - pad.r) * (t - t0)) / Math.max(1, t1 - t0);
    const y = (r) => H - pad.b - ((H - pad.t - pad.b) * r) / max;
    const line = points.map((p) => `${x(p.t).toFixed(1)},${y(p.rate).toFixed(1)}`).join(" ");
    root.append(
      svg("polygon", { class: "area", points: `${x(t0)},${H - pad.b} ${line} ${x(t1)},${H - pad.b}` }),
      svg("polyline", { class: "line", points: line }),
      svg("text", { x: 2, y: pad.t + 10 }, `${Math.round(max)}`),
      svg("text", { x: 2, y: H - pad.b }, "0"),
      svg(
        "text",
        { x: pad.l, y: H - 4 },
        `${duration((t1 - t0) / 1000)} of the run, ${t.bucketSeconds}s buckets`,
      ),
      svg(
        "text",
        { x: W - pad.r - 150, y: H - 4 },
        `${run.finishedAt ? "last" : "now"} ${Math.round(points[points.length - 1].rate)} rows/s`,
      ),
    );
    this.chart.replaceChildren(root);
  }

  renderNotes(groups) {
    this.notes.replaceChildren(
      ...(groups.length === 0
        ? [h("tr", {}, h("td", { colspan: 6, class: "notice" }, "Nothing was skipped or failed."))]
        : groups.map((g) =>
            h(
              "tr",
              {},
              h("td", { class: "num" }, fmt(g.count)),
              h("td", {}, g.level),
              h("td", {}, g.kind),
              h("td", {}, g.reason),
              h("td", { class: "mono" }, g.samples.join(", ")),
              h(
                "td",
                {},
                g.level === "info"
                  ? ""
                  : h(
                      "button",
                      {
                        type: "button",
                        class: "redrive",
                        title: "read these rows from the source again and import them (a re-drive)",
                        disabled: !this.last?.can?.redrive,
                        onclick: () => this.redrive(g),
                      },
                      "Retry these",
                    ),
              ),
            ),
          )),
    );
  }

  /** Re-drives one reason group: only its rows are read from the source again. */
  async redrive(group) {
    const query = new URLSearchParams({ kind: group.kind, reason: group.reason });
    await this.steer(`retry?${query}`);
  }
}

// ---- routing -----------------------------------------------------------------------------------

function onError(err) {
  if (err instanceof ApiError && err.status === 401) {
    showProblem(err.message);
    stopLive();
    return keyForm(route);
  }
  showProblem(err.message || String(err));
}

function route() {
  stopLive();
  if (!apiKey()) return keyForm(route);
  forgetKey.hidden = false;
  const path = location.hash.replace(/^#/, "").split("?")[0] || "/";
  const m = /^\/runs\/([^/]+)$/.exec(path);
  const shown = m ? showRun(decodeURIComponent(m[1])) : showRuns();
  shown.then(() => showProblem(""), onError);
}

window.addEventListener("hashchange", route);
route();
