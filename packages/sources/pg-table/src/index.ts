/**
 * The `pg-table` source: a large Postgres table copied by time slots (docs/sources.md). The
 * provider is what the engine runs (registered by name in @drover/source-registry); the ULID
 * helpers are what the demo and the system tests use to make and bound a source table.
 */
export { pgTableProvider } from "./provider.js";
export { encodeUlidTime, ulidFloor } from "./ulid.js";
