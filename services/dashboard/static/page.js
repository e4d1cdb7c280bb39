// The page's frame (index.html): where views go, the line saying where the reader is, the
// problem box, and what happens when something fails.

import { ApiError } from "./api.js";

/** The status words, from /vocabulary.js (served from the definition every layer reads). */
export const VOCABULARY = window.DROVER_VOCABULARY;
export const main = document.getElementById("main");
export const where = document.getElementById("where");
export const forgetKeyButton = document.getElementById("forget-key");
const problemBox = document.getElementById("problem");

export function showProblem(message) {
  problemBox.textContent = message;
  problemBox.hidden = !message;
}

let keyRefused = () => {};

/** What the page does when the dashboard refuses the key: the router asks for another. */
export function onKeyRefused(then) {
  keyRefused = then;
}

export function onError(err) {
  if (err instanceof ApiError && err.status === 401) {
    showProblem(err.message);
    return keyRefused();
  }
  showProblem(err.message || String(err));
}
