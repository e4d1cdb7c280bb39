// Rows by kind: one bar per kind, split by outcome, with its tasks' progress underneath.

import { h } from "./dom.js";
import { fmt } from "./format.js";

const rowsOf = (p) => p.imported + p.matched + p.alreadyHere + p.skipped + p.failed;

export class KindsPanel {
  constructor() {
    this.kinds = h("div", { id: "kinds" });
    this.root = h(
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
        h("span", { class: "already", title: "an earlier run (or attempt) had imported it" }, "already here"),
        h("span", { class: "skipped", title: "kept as a placeholder, with a reason" }, "skipped"),
        h("span", { class: "failed", title: "not imported, with a reason" }, "failed"),
      ),
      h(
        "p",
        { class: "notice" },
        "Matched: the product already had the record (e.g. a contact with the same email) and it was reused. Already here: an earlier run, or an earlier attempt of this one, had imported it.",
      ),
      this.kinds,
    );
  }

  render(run) {
    // A revert run imports nothing: its rows by kind would all be zero.
    this.root.hidden = Boolean(run.revert?.reverts);
    // Every bar is drawn to the scale of the kind with the most rows.
    const most = Math.max(1, ...run.progress.map(rowsOf));
    this.kinds.replaceChildren(...run.progress.map((p) => kindRow(p, most)));
  }
}

function kindRow(p, most) {
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
        { class: "bar", role: "img", "aria-label": `${p.kind}: ${fmt(rowsOf(p))} rows` },
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
}
