import type { Provider } from "@drover/provider-sdk";
import { crmProvider } from "./crm/provider.js";
import { pgTableProvider } from "./pg-table/index.js";

export { nextMidnight, pipedriveAdapter } from "./crm/client.js";
export { standInId } from "./crm/fields.js";
export { crmProvider } from "./crm/provider.js";
export { NOT_LINKED } from "./crm/writers.js";
export * from "./pg-table/index.js";

/** Every source Drover can import from, by the name a StartRun uses. */
export const providers: ReadonlyMap<string, Provider> = new Map([
  [crmProvider.name, crmProvider],
  [pgTableProvider.name, pgTableProvider],
]);
