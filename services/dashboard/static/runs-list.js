// The list of runs the key may see, filtered by status and read again every few seconds.

import { api } from "./api.js";
import { h } from "./dom.js";
import { fmt, when } from "./format.js";
import { main, onError, VOCABULARY, where } from "./page.js";

const REFRESH_MS = 5000;
let listTimer;

export function stopRefreshing() {
  clearInterval(listTimer);
}

export async function showRuns() {
  where.textContent = "Runs";
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const status = params.get("status") || "";
  const body = h("tbody", {});
  main.replaceChildren(
    h(
      "section",
      { class: "panel" },
      h("h1", {}, "Runs"),
      h("div", { class: "filters" }, h("label", {}, "Status ", statusFilter(status))),
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
        : runs.map(runRow)),
    );
  };
  await load();
  listTimer = setInterval(() => load().catch(onError), REFRESH_MS);
}

/** The status filter; choosing a status changes the address, and the router shows that list. */
function statusFilter(status) {
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
  return select;
}

function runRow(r) {
  return h(
    "tr",
    { "data-run-id": r.id },
    h("td", { class: "mono" }, h("a", { href: `#/runs/${encodeURIComponent(r.id)}` }, r.id)),
    h("td", {}, r.tenantId),
    h("td", {}, `${r.source}:${r.sourceAccount}`),
    h("td", {}, h("span", { class: `status ${r.status}` }, r.status)),
    h("td", {}, `${Math.min(r.currentPhase + 1, r.phases.length)} of ${r.phases.length}`),
    h("td", { class: "num" }, fmt(r.rows)),
    h("td", {}, when(r.createdAt)),
  );
}
