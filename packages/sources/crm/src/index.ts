/**
 * The `crm` source: Pipedrive, read through its public API (docs/sources.md). The provider is what
 * the engine runs (registered by name in @drover/source-registry); the rest is what the system
 * tests use of Pipedrive's shapes, and the parsers, lists and batch writers the bench's plain loop
 * (test/bench/plain-crm-import.ts) runs: the same rows through the same writers into the same
 * tables, without the ledger, tasks or queue around them, to measure what those cost.
 */
export { pipedriveAdapter } from "./client.js";
export { sourceId, standInId } from "./fields.js";
export { KIND_LISTS } from "./lists.js";
export { crmProvider } from "./provider.js";
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
  activityKind,
  companyKind,
  dealKind,
  emailKind,
  independentBatch,
  leadKind,
  noteKind,
  personBatch,
} from "./writers.js";
