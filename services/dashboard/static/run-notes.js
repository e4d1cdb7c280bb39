// Reasons: the run's skipped and failed rows grouped by kind and reason, each group with a button
// that re-drives its rows.

import { h } from "./dom.js";
import { fmt } from "./format.js";

export class NotesPanel {
  /** `redrive(group)` re-drives a group's rows; `canRedrive()` says whether the run allows it now. */
  constructor({ redrive, canRedrive }) {
    this.redrive = redrive;
    this.canRedrive = canRedrive;
    this.notes = h("tbody", {});
    this.root = h(
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
    );
  }

  render(groups) {
    this.notes.replaceChildren(
      ...(groups.length === 0
        ? [h("tr", {}, h("td", { colspan: 6, class: "notice" }, "Nothing was skipped or failed."))]
        : groups.map((g) => this.groupRow(g))),
    );
  }

  /** The run's status decides whether its groups can be re-driven; the groups stay as they are. */
  allowRedrive(can) {
    for (const b of this.notes.querySelectorAll("button.redrive")) b.disabled = !can;
  }

  groupRow(g) {
    return h(
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
                disabled: !this.canRedrive(),
                onclick: () => this.redrive(g),
              },
              "Retry these",
            ),
      ),
    );
  }
}
