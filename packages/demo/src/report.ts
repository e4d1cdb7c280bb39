import { COUNTS_LEGEND, verificationTable } from "@drover/cli";
import type { NoteGroup, Verification } from "@drover/proto";

/** How many groups of reasons the demo lists before it points at `drover notes`. */
export const REASON_GROUPS_SHOWN = 8;

/** The CLI as a user calls it from the repository (the bin keeps its exit codes; `pnpm drover` does not). */
export const DROVER = "./node_modules/.bin/drover";

/** The line about the contacts the demo put in the product itself, so a first run has something to match. */
export function seededLine(seeded: number, tenant: string): string {
  return `Seeded ${seeded} contacts into the product for tenant "${tenant}" before the run (every 25th sandbox contact with an email), to show matching: the run reuses them ("matched") instead of creating twins, as it does for sandbox contacts sharing an email with one imported before them`;
}

/** What each column of the per-kind table means, printed under it. */
export function legend(): string {
  return COUNTS_LEGEND.map((l) => `  ${l}`).join("\n");
}

/**
 * The run's grouped reasons, the most frequent first, at most `shown` groups; when there are more,
 * a last line says how many groups and rows were left out and how to see them all.
 */
export function reasonsBlock(
  groups: readonly NoteGroup[],
  runId: string,
  shown = REASON_GROUPS_SHOWN,
): string {
  if (groups.length === 0) return "";
  const lines = groups
    .slice(0, shown)
    .map(
      (g) =>
        `  ${String(g.count).padStart(6)} × ${g.level} ${g.kind}: ${g.reason}${
          g.sampleSubjectIds.length > 0 ? ` (e.g. ${g.sampleSubjectIds.join(", ")})` : ""
        }`,
    );
  const rest = groups.slice(shown);
  if (rest.length > 0) {
    const rows = rest.reduce((n, g) => n + g.count, 0n);
    lines.push(
      `  and ${rest.length} more group${rest.length === 1 ? "" : "s"} (${rows} row${rows === 1n ? "" : "s"}): ${DROVER} notes ${runId}`,
    );
  }
  return `Reasons:\n${lines.join("\n")}`;
}

/** Mismatches the demo lists per kind; `drover status` lists every one. */
export const MISMATCHES_SHOWN = 5;

/**
 * The verification's result as the demo prints it: one line, its table per kind, the first few
 * mismatches of each kind and where the rest are.
 */
export function verificationBlock(v: Verification, runId: string): string {
  const head = v.ok
    ? "Verified: per kind, the sandbox's rows match the ledger's, and every sampled row matches its source."
    : v.error
      ? `VERIFICATION COULD NOT FINISH: ${v.error}`
      : "VERIFICATION FOUND PROBLEMS:";
  const more = v.kinds.some((k) => k.mismatches.length > MISMATCHES_SHOWN)
    ? `\nEvery mismatch: ${DROVER} status ${runId}`
    : "";
  return `${head}\n${verificationTable(v, "ledger", { mismatchesPerKind: MISMATCHES_SHOWN })}${more}`;
}

export interface KeptServices {
  coordinatorAddress: string;
  adminToken: string;
  dashboardUrl: string | undefined;
  sandboxUrl: string;
  sandboxToken: string;
  source: string;
  sourceAccount: string;
  runId: string;
}

/**
 * What `--keep` prints once the run is verified: the exact lines that point the CLI at the kept
 * coordinator, the run page, and how to start another run against the same sandbox.
 */
export function keepInstructions(k: KeptServices): string {
  return [
    "The services stay up until Ctrl-C. In another shell, at the repository's root:",
    `  export DROVER_ADDRESS=${k.coordinatorAddress} DROVER_TOKEN=${k.adminToken}`,
    `  ${DROVER} status ${k.runId}`,
    ...(k.dashboardUrl ? [`Run page: ${k.dashboardUrl} (API key: ${k.adminToken})`] : []),
    `Sandbox (${k.source}): ${k.sandboxUrl} (API token: ${k.sandboxToken}); another run against it:`,
    `  export DROVER_SOURCE_TOKEN=${k.sandboxToken}`,
    `  ${DROVER} start --tenant another-tenant --source ${k.source} --account ${k.sourceAccount} --base-url ${k.sandboxUrl}`,
  ].join("\n");
}
