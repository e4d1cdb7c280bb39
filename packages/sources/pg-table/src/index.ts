export { type PgTableConfig, parsePgTableSettings } from "./config.js";
export { pgTableProvider } from "./provider.js";
export { PG_TABLE_KIND, slotsOf } from "./slots.js";
export { closePgTableSources } from "./source-table.js";
export { decodeUlidTime, encodeUlidTime, makeUlid, ulidFloor } from "./ulid.js";
