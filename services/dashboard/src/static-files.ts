import { readdirSync, readFileSync } from "node:fs";
import { extname } from "node:path";
import { LIVE_RUN_STATUSES, RUN_STATUSES } from "@drover/proto";

export interface StaticFile {
  body: Buffer | string;
  type: string;
}

const STATIC_DIR = new URL("../static/", import.meta.url);

// Module scripts are refused under nosniff unless they come as JavaScript.
const TYPES: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
};

/**
 * The page's files, read once at start: index.html at `/`, and every script module and style
 * sheet of static/ under its own name (app.js imports the others by those names), plus
 * /vocabulary.js, written here from the status words every layer reads.
 */
export function loadStaticFiles(): Record<string, StaticFile> {
  const files: Record<string, StaticFile> = {
    "/": { body: readFileSync(new URL("index.html", STATIC_DIR)), type: "text/html; charset=utf-8" },
  };
  for (const name of readdirSync(STATIC_DIR)) {
    const type = TYPES[extname(name)];
    if (type) files[`/${name}`] = { body: readFileSync(new URL(name, STATIC_DIR)), type };
  }
  // The page's status words come from the one definition every other layer reads, not a copy in
  // the page's modules: a classic script of this origin (the CSP allows no inline script), loaded
  // before app.js.
  files["/vocabulary.js"] = {
    body: `window.DROVER_VOCABULARY = Object.freeze(${JSON.stringify({
      runStatuses: RUN_STATUSES,
      liveRunStatuses: LIVE_RUN_STATUSES,
    })});\n`,
    type: TYPES[".js"]!,
  };
  return files;
}
