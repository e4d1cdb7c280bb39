import type { Provider } from "@drover/provider-sdk";
import { crmProvider } from "./crm/provider.js";
import { pgTableProvider } from "./pg-table/index.js";

export { dailyRefusal, nextMidnight, pipedriveAdapter } from "./crm/client.js";
export { DEFAULT_DAILY_RESET, dailyResetProblem } from "./crm/daily-reset.js";
export { standInId } from "./crm/fields.js";
export { type EventCursor, eventSeeds, isEventCursor } from "./crm/follow-events.js";
export { crmProvider } from "./crm/provider.js";
export {
  crmWebhooks,
  kindOfWebhookEntity,
  WEBHOOK_OBJECT_OF_KIND,
  WebhookRegistrationError,
} from "./crm/webhooks.js";
export { NOT_LINKED } from "./crm/writers.js";
export * from "./pg-table/index.js";

/** Every source Drover can import from, by the name a StartRun uses. */
export const providers: ReadonlyMap<string, Provider> = new Map([
  [crmProvider.name, crmProvider],
  [pgTableProvider.name, pgTableProvider],
]);

/**
 * The crm's parsers, lists and batch writers, for the bench's plain loop
 * (test/bench/plain-crm-import.ts): the same rows through the same writers into the same tables,
 * without the ledger, tasks or queue around them, to measure what those cost.
 */
export { sourceId } from "./crm/fields.js";
export { KIND_LISTS } from "./crm/lists.js";
export {
  parseActivity,
  parseCompany,
  parseDeal,
  parseEmail,
  parseLead,
  parseNote,
  parsePerson,
  unwrapMail,
} from "./crm/records.js";
export {
  activityKind,
  companyKind,
  dealKind,
  emailKind,
  independentBatch,
  leadKind,
  noteKind,
  personBatch,
} from "./crm/writers.js";
