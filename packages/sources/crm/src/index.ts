/**
 * The `crm` source: Pipedrive, read through its public API (docs/sources.md). The provider is what
 * the engine runs (registered by name in @drover/source-registry); the rest is what tests, the demo
 * and the benches use of Pipedrive's shapes.
 */
export { dailyRefusal, nextMidnight, pipedriveAdapter } from "./client.js";
export { DEFAULT_DAILY_RESET, dailyResetProblem } from "./daily-reset.js";
export { sourceId, standInId } from "./fields.js";
export { type EventCursor, eventSeeds, isEventCursor } from "./follow-events.js";
export { KIND_LISTS } from "./lists.js";
export { crmProvider } from "./provider.js";
/**
 * The crm's parsers and batch writers, for the bench's plain loop (test/bench/plain-crm-import.ts):
 * the same rows through the same writers into the same tables, without the ledger, tasks or queue
 * around them, to measure what those cost.
 */
export {
  parseActivity,
  parseCompany,
  parseDeal,
  parseEmail,
  parseLead,
  parseNote,
  parsePerson,
  unwrapMail,
} from "./records.js";
export {
  crmWebhooks,
  kindOfWebhookEntity,
  WEBHOOK_OBJECT_OF_KIND,
  WebhookRegistrationError,
} from "./webhooks.js";
export {
  activityKind,
  companyKind,
  dealKind,
  emailKind,
  independentBatch,
  leadKind,
  NOT_LINKED,
  noteKind,
  personBatch,
} from "./writers.js";
