// The top of a run's page: what the run is, where it stands (phase, waits, ETA, following the
// source, error) and the steering buttons.

import { facts, h } from "./dom.js";
import { fmt, localTime, waitText, when } from "./format.js";

export class RunSummary {
  /**
   * `steer(action)` and `askRevert()` are the buttons' actions; `isShown()` says whether the page
   * still shows this run (a countdown stops when it does not); `revertLine` is the revert panels'
   * line about what this run reverts or was reverted by.
   */
  constructor(runId, { steer, askRevert, isShown, revertLine }) {
    this.isShown = isShown;
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
    this.learned = h("dl", { class: "facts", id: "run-facts", hidden: true });
    const button = (id, label, onclick, danger) =>
      h("button", { type: "button", id, class: danger ? "danger" : false, onclick }, label);
    this.buttons = {
      stop: button("stop", "Stop", () => steer("stop"), true),
      resume: button("resume", "Resume", () => steer("resume")),
      retry: button("retry", "Retry", () => steer("retry")),
      revert: button("revert", "Revert this run…", askRevert, true),
    };
    this.root = h(
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
      revertLine,
      this.error,
      h("div", { class: "actions" }, ...Object.values(this.buttons)),
    );
  }

  setLive(on) {
    this.liveBadge.textContent = on ? "● live" : "";
  }

  render(run) {
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
    this.renderWait(run.budgetWait);
    this.renderEta(run.eta);
    this.renderFollow(run.follow);
    this.error.textContent = run.error ? `Error: ${run.error}` : "";
    this.error.hidden = !run.error;
    this.buttons.stop.disabled = !run.can.stop;
    this.buttons.resume.disabled = !run.can.resume;
    this.buttons.retry.disabled = !run.can.retry;
    this.buttons.revert.hidden = !run.can.revert;
    facts(
      this.learned,
      run.facts.map((f) => [f.key, f.value]),
    );
    this.learned.hidden = run.facts.length === 0;
    this.title.textContent = `${run.isDryRun ? "Dry run" : run.revert?.reverts ? "Revert run" : "Run"} ${run.id}`;
  }

  /** While every button waits for an answer, none can be pressed again. */
  disableButtons() {
    for (const b of Object.values(this.buttons)) b.disabled = true;
  }

  /** A parked run may not change for hours: the wait is counted down here, not only on an update. */
  renderWait(wait) {
    const showWait = () => {
      const left = wait ? (Date.parse(wait.until) - Date.now()) / 1000 : 0;
      this.budgetWait.textContent =
        left > 0 ? `${wait.text} ${localTime(wait.until, wait.timeZone)} (in ${waitText(left)})` : "";
      this.budgetWait.hidden = !(left > 0);
      if (left <= 0 || !this.isShown()) clearInterval(this.waitTimer);
    };
    clearInterval(this.waitTimer);
    if (wait) this.waitTimer = setInterval(showWait, 30_000);
    showWait();
  }

  /** Against the source's budget: the work left, paced by its burst window and daily resets. */
  renderEta(eta) {
    this.eta.textContent = eta
      ? `Ends in ${eta.text} (budget: ${fmt(eta.requests)} requests, ${fmt(eta.tokens)} tokens${
          eta.dailyResets > 0 ? `, ${eta.dailyResets} daily reset${eta.dailyResets === 1 ? "" : "s"}` : ""
        })`
      : "";
    this.eta.hidden = !eta;
  }

  /** A run that follows its source after the import: how often, how far behind, what each pass changed. */
  renderFollow(follow) {
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
  }
}

function phaseText(run) {
  const n = Math.min(run.currentPhase + 1, run.phases.length);
  const kinds = run.phases[run.currentPhase];
  return kinds
    ? `Phase ${n} of ${run.phases.length}: ${kinds.join(", ")}`
    : `All ${run.phases.length} phases done`;
}
