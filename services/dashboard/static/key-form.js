// The API key form: the page keeps no credential of its own, so it asks the operator for one.

import { storeKey } from "./api.js";
import { h } from "./dom.js";
import { forgetKeyButton, main, showProblem, where } from "./page.js";

/** Asks for a key, keeps it for this tab, then calls `next`. */
export function keyForm(next) {
  where.textContent = "";
  forgetKeyButton.hidden = true;
  const input = h("input", {
    type: "password",
    id: "api-key",
    name: "api-key",
    autocomplete: "off",
    placeholder: "drv_…",
    "aria-label": "API key",
  });
  const form = h(
    "form",
    {
      class: "panel key-form",
      id: "key-form",
      onsubmit: (e) => {
        e.preventDefault();
        const key = input.value.trim();
        if (!key) return showProblem("Enter an API key.");
        storeKey(key);
        showProblem("");
        next();
      },
    },
    h("h1", {}, "Enter an API key"),
    h(
      "p",
      { class: "notice" },
      "The page calls the coordinator with your key; it stays in this tab (sessionStorage) and is forgotten when the tab closes. A tenant key shows that tenant's runs only.",
    ),
    input,
    h("button", { type: "submit", id: "use-key" }, "Use this key"),
  );
  main.replaceChildren(form);
  input.focus();
}
