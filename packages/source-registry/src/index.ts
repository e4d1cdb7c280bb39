import type { Provider } from "@drover/provider-sdk";
import { crmProvider } from "@drover/source-crm";
import { hubspotProvider } from "@drover/source-hubspot";
import { pgTableProvider } from "@drover/source-pg-table";

/**
 * Every source Drover can import from, by the name a StartRun uses: the one place that knows the
 * source packages. The coordinator and the worker look a run's provider up here by `run.source`;
 * nothing else of theirs knows a source. Adding a source: docs/sources.md.
 */
export const sources: ReadonlyMap<string, Provider> = new Map(
  [crmProvider, hubspotProvider, pgTableProvider].map((p) => [p.name, p]),
);
