// Side by side: the run's tasks by state, and its source account's budget.

import { facts, h } from "./dom.js";
import { fmt, when } from "./format.js";

export class TasksAndBudget {
  constructor() {
    this.tasks = h("dl", { class: "facts", id: "tasks" });
    this.budget = h("dl", { class: "facts", id: "budget" });
    this.root = h(
      "div",
      { class: "grid" },
      h("section", { class: "panel" }, h("h2", {}, "Tasks"), this.tasks),
      h("section", { class: "panel" }, h("h2", {}, "Source budget"), this.budget),
    );
  }

  render(run) {
    const t = run.tasks;
    facts(this.tasks, [
      ["done", fmt(t.succeeded), "tasks-done"],
      ["in flight", fmt(t.running), "tasks-running"],
      ["waiting", fmt(t.pending)],
      ["failed", fmt(t.failed)],
      ["cancelled", fmt(t.cancelled)],
    ]);
    // The server labels each fact with its unit and period and leaves out what does not apply.
    const b = run.budget;
    facts(
      this.budget,
      b
        ? b.facts.map((f) => [f.label, f.at ? `${f.text} ${when(f.at)}` : f.text])
        : [["budget", "no request leased on this account yet"]],
    );
  }
}
