// History: the run's audit events, who started, stopped, retried or reverted it, and who was
// refused.

import { api, runPath } from "./api.js";
import { h } from "./dom.js";
import { when } from "./format.js";

export class HistoryPanel {
  constructor(runId) {
    this.runId = runId;
    this.history = h("tbody", {});
    this.root = h(
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
    );
  }

  async refresh() {
    let events;
    try {
      ({ events } = await api("GET", runPath(this.runId, "history")));
    } catch {
      // The history is a footnote to the run: a failure to read it does not replace the page.
      return;
    }
    this.history.replaceChildren(
      ...(events.length === 0
        ? [h("tr", {}, h("td", { colspan: 5, class: "notice" }, "Nothing recorded."))]
        : events.map(eventRow)),
    );
  }
}

function eventRow(e) {
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
}
