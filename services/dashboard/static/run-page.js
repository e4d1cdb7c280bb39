// One run's page: its panels, fed by the run as GetRun and the live stream give it, and the
// steering (stop, resume, retry, re-drive) that changes it.

import { api, runPath } from "./api.js";
import { h } from "./dom.js";
import { follow, isFollowing } from "./live.js";
import { main, onError, showProblem, where } from "./page.js";
import { DryRunPanel } from "./run-dry-run.js";
import { HistoryPanel } from "./run-history.js";
import { KindsPanel } from "./run-kinds.js";
import { NotesPanel } from "./run-notes.js";
import { RevertPanels } from "./run-revert.js";
import { RunSummary } from "./run-summary.js";
import { TasksAndBudget } from "./run-tasks-budget.js";
import { ThroughputPanel } from "./run-throughput.js";
import { VerificationPanel } from "./run-verification.js";

let shownRun; // the RunView on the page, if any

export function forgetShownRun() {
  shownRun = undefined;
}

export async function showRun(runId) {
  where.textContent = `Run ${runId}`;
  const { run, notes } = await api("GET", runPath(runId));
  const view = new RunView(runId);
  shownRun = view;
  main.replaceChildren(view.root);
  view.render(run);
  view.renderNotes(notes);
  await view.refreshThroughput();
  view.refreshHistory();
  follow(runId, view);
}

class RunView {
  constructor(runId) {
    this.runId = runId;
    this.last = null; // the run as last rendered
    this.revert = new RevertPanels(runId, { attempted: () => this.refreshHistory() });
    this.summary = new RunSummary(runId, {
      steer: (action) => this.steer(action),
      askRevert: () => this.revert.ask(),
      isShown: () => shownRun === this,
      revertLine: this.revert.line,
    });
    this.kinds = new KindsPanel();
    this.dryRun = new DryRunPanel();
    this.verification = new VerificationPanel();
    this.tasksAndBudget = new TasksAndBudget();
    this.throughput = new ThroughputPanel(runId);
    this.notes = new NotesPanel({
      redrive: (group) => this.redrive(group),
      canRedrive: () => this.last?.can?.redrive,
    });
    this.history = new HistoryPanel(runId);
    this.root = h(
      "div",
      {},
      this.summary.root,
      this.revert.confirm,
      this.revert.progress,
      this.kinds.root,
      this.dryRun.root,
      this.verification.root,
      this.tasksAndBudget.root,
      this.throughput.root,
      this.notes.root,
      this.history.root,
    );
  }

  render(run) {
    this.last = run;
    this.summary.render(run);
    this.revert.render(run);
    this.notes.allowRedrive(run.can.redrive);
    this.kinds.render(run);
    this.tasksAndBudget.render(run);
    this.verification.render(run);
    this.dryRun.render(run);
    this.throughput.draw(run);
  }

  renderNotes(groups) {
    this.notes.render(groups);
  }

  setLive(on) {
    this.summary.setLive(on);
  }

  refreshThroughput(minMs) {
    return this.throughput.refresh(minMs);
  }

  refreshHistory() {
    return this.history.refresh();
  }

  async steer(action) {
    this.summary.disableButtons();
    try {
      const { run } = await api("POST", runPath(this.runId, action));
      showProblem("");
      this.render(run);
      if (action !== "stop" && !isFollowing()) follow(this.runId, this);
    } catch (err) {
      onError(err);
      if (this.last) this.render(this.last);
    } finally {
      // Refused or not, the attempt is in the run's history now.
      this.refreshHistory();
    }
  }

  /** Re-drives one reason group: only its rows are read from the source again. */
  async redrive(group) {
    const query = new URLSearchParams({ kind: group.kind, reason: group.reason });
    await this.steer(`retry?${query}`);
  }

  /**
   * A run's verification comes after its end (a worker checks it against the source): the page
   * reads the run again now and then until it is there, while the page still shows this run.
   */
  async awaitVerification() {
    for (let i = 0; i < 100 && shownRun === this && this.last?.verificationPending; i++) {
      await new Promise((r) => setTimeout(r, i === 0 ? 500 : 3000));
      if (shownRun !== this || isFollowing()) return;
      try {
        const { run } = await api("GET", runPath(this.runId));
        if (shownRun === this && !isFollowing()) this.render(run);
      } catch (err) {
        return onError(err);
      }
    }
  }
}
