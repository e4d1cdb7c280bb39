// "Revert this run": a confirmation first, saying what goes and what stays; a refusal names the
// later runs whose records depend on this one's, and force is offered then. On a revert run, its
// own progress: per kind what it removed, found gone and left in place.

import { ApiError, api, runPath } from "./api.js";
import { h, runLink } from "./dom.js";
import { fmt } from "./format.js";
import { onError, showProblem } from "./page.js";

export class RevertPanels {
  /** `attempted()` runs after each revert, refused or not (the attempt is in the run's history). */
  constructor(runId, { attempted }) {
    this.runId = runId;
    this.attempted = attempted;
    /** For the run's summary: what this run reverts, or which run reverted it. */
    this.line = h("p", { class: "notice", id: "run-revert", hidden: true });
    this.force = h("input", { type: "checkbox", id: "revert-force" });
    this.refusal = h("p", { class: "problem", id: "revert-refusal", hidden: true });
    this.runs = h("ul", { id: "revert-runs" });
    this.confirm = this.confirmation();
    this.summary = h("p", { id: "revert-summary" });
    this.rows = h("tbody", {});
    this.progress = this.progressPanel();
  }

  confirmation() {
    return h(
      "section",
      { class: "panel", id: "revert-confirm", hidden: true },
      h("h2", {}, "Revert this run?"),
      h(
        "p",
        {},
        "Every record this run created is removed from the product, children before parents, as a revert run of its own (it can be stopped and resumed). Records it matched, which were already there, stay as they are. A record that cannot go stays, with a note saying why.",
      ),
      this.refusal,
      this.runs,
      h(
        "label",
        {},
        this.force,
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
        h("button", { type: "button", id: "revert-cancel", onclick: () => this.close() }, "Cancel"),
      ),
    );
  }

  progressPanel() {
    return h(
      "section",
      { class: "panel", id: "revert-progress", hidden: true },
      h("h2", {}, "Revert: records removed, children first"),
      this.summary,
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
        this.rows,
      ),
      h(
        "p",
        { class: "notice" },
        "Why a record could not be removed is under Reasons, grouped per kind and reason.",
      ),
    );
  }

  /** What a revert run reverts and how far it got; on a reverted run, which run reverted it. */
  render(run) {
    if (!run.can.revert) this.close();
    const r = run.revert;
    this.line.replaceChildren(
      ...(r?.reverts
        ? ["Revert of run ", runLink(r.reverts), r.force ? " (forced: other runs' links cleared)" : ""]
        : r?.revertedBy
          ? ["Reverted by run ", runLink(r.revertedBy), ": its records were removed from the product."]
          : []),
    );
    this.line.hidden = !r;
    const reverting = Boolean(r?.reverts);
    this.progress.hidden = !reverting;
    if (!reverting) return;
    const total = r.kinds.reduce((n, k) => n + k.total, 0);
    const gone = r.kinds.reduce((n, k) => n + k.gone, 0);
    this.summary.textContent = `${fmt(r.removed)} of ${fmt(total)} records removed${
      gone > 0 ? `, ${fmt(gone)} already gone` : ""
    }, ${fmt(r.kept)} could not be removed.`;
    this.rows.replaceChildren(...r.kinds.map(kindRow));
  }

  ask() {
    this.refusal.hidden = true;
    this.runs.replaceChildren();
    this.confirm.hidden = false;
    this.confirm.scrollIntoView({ block: "nearest" });
  }

  close() {
    this.confirm.hidden = true;
  }

  /**
   * Starts the revert and opens the revert run's page. Refused, the coordinator's sentence stays
   * in the confirmation with links to the runs it names; the operator may then tick force.
   */
  async revert() {
    const go = this.confirm.querySelector("#revert-go");
    go.disabled = true;
    try {
      const force = this.force.checked ? "?force=1" : "";
      const { run } = await api("POST", `${runPath(this.runId, "revert")}${force}`);
      showProblem("");
      location.hash = `#/runs/${encodeURIComponent(run.id)}`;
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 409) return onError(err);
      this.refusal.textContent = err.message;
      this.refusal.hidden = false;
      const named = [...(err.body.runIds || []), ...(err.body.revertedBy ? [err.body.revertedBy] : [])];
      this.runs.replaceChildren(...named.map((id) => h("li", {}, runLink(id))));
    } finally {
      go.disabled = false;
      this.attempted();
    }
  }
}

function kindRow(k) {
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
}
