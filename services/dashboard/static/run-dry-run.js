// A dry run's report: per kind what a real run would do, why rows would skip or fail, what it
// would cost. Hidden on a real run.

import { h } from "./dom.js";
import { fmt } from "./format.js";

export class DryRunPanel {
  constructor() {
    this.summary = h("p", { id: "dry-run-cost" });
    this.rows = h("tbody", {});
    this.reasons = h("ul", { id: "dry-run-reasons" });
    this.root = h(
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
        this.rows,
      ),
      this.reasons,
      this.summary,
    );
  }

  render(run) {
    const d = run.dryRun;
    this.root.hidden = !d;
    if (!d) return;
    this.rows.replaceChildren(...d.kinds.map(kindRow));
    this.reasons.replaceChildren(...d.kinds.flatMap((k) => [...missingParents(k), ...reasons(k)]));
    this.summary.textContent = `A real run would cost ${fmt(d.requests)} requests, ${fmt(d.tokens)} tokens: ${d.durationText} at the account's budget${
      d.dailyResets > 0 ? `, ${d.dailyResets} daily reset${d.dailyResets === 1 ? "" : "s"}` : ""
    }.`;
  }
}

function kindRow(k) {
  return h(
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
  );
}

function missingParents(k) {
  if (k.missingParents.length === 0) return [];
  const parents = k.missingParents
    .map((m) => `${m.parent === "none" ? "no parent given" : m.parent} ${fmt(m.count)}`)
    .join(", ");
  return [h("li", {}, `${k.kind} would skip for missing parents: ${parents}`)];
}

function reasons(k) {
  return k.reasons.map((r) =>
    h(
      "li",
      {},
      `${k.kind} ${r.level === "error" ? "would fail" : "would skip"} ${fmt(r.count)}: ${r.reason}${
        r.samples.length > 0 ? ` (e.g. ${r.samples.join(", ")})` : ""
      }`,
    ),
  );
}
