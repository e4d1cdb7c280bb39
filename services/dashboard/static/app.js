// The run page's entry: which view the address asks for, and what the page does when it leaves
// one. /vocabulary.js (a classic script) has run before this module.

import { apiKey, forgetKey } from "./api.js";
import { keyForm } from "./key-form.js";
import { stopFollowing } from "./live.js";
import { forgetKeyButton, onError, onKeyRefused, showProblem } from "./page.js";
import { forgetShownRun, showRun } from "./run-page.js";
import { showRuns, stopRefreshing } from "./runs-list.js";

/** Ends what the view on the page keeps going: the list's refresh, a run's live stream. */
function leaveView() {
  stopRefreshing();
  stopFollowing();
  forgetShownRun();
}

function route() {
  leaveView();
  if (!apiKey()) return keyForm(route);
  forgetKeyButton.hidden = false;
  const path = location.hash.replace(/^#/, "").split("?")[0] || "/";
  const m = /^\/runs\/([^/]+)$/.exec(path);
  const shown = m ? showRun(decodeURIComponent(m[1])) : showRuns();
  shown.then(() => showProblem(""), onError);
}

onKeyRefused(() => {
  leaveView();
  keyForm(route);
});

forgetKeyButton.addEventListener("click", () => {
  forgetKey();
  leaveView();
  route();
});

window.addEventListener("hashchange", route);
route();
