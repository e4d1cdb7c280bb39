// The finished run's check against its source; hidden while the run goes.

import { h } from "./dom.js";
import { fmt, when } from "./format.js";

export class VerificationPanel {
  constructor() {
    this.summary = h("p", { id: "verification-result" });
    this.rows = h("tbody", {});
    this.problems = h("ul", { id: "verification-mismatches" });
    this.root = h(
      "section",
      { class: "panel", id: "verification", hidden: true },
      h("h2", {}, "Verification"),
      this.summary,
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
        this.rows,
      ),
      this.problems,
    );
  }

  render(run) {
    const v = run.verification;
    this.root.hidden = !v && !run.verificationPending;
    this.rows.replaceChildren();
    this.problems.replaceChildren();
    if (!v) {
      this.summary.setAttribute("class", "notice");
      this.summary.textContent =
        "Not verified yet: a worker checks the finished run against its source shortly.";
      return;
    }
    this.summary.setAttribute("class", `verification ${v.ok ? "ok" : "problem"}`);
    this.summary.textContent = `${
      v.ok
        ? "Passed: every kind's rows are accounted for, and every sampled row matches its source."
        : v.error
          ? `Could not finish: ${v.error}`
          : "Found problems (listed below)."
    }${v.verifiedAt ? ` Verified ${when(v.verifiedAt)}.` : ""}`;
    this.rows.replaceChildren(
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
    this.problems.replaceChildren(
      ...v.kinds.flatMap((k) => k.mismatches.map((m) => h("li", {}, `${k.kind}: ${m}`))),
    );
  }
}
