/**
 * What a source package may use of the database: connections, transactions and statements on the
 * product's tables (and a source's own), never the engine's schema (`drover.*`), which only the
 * engine reads and writes (test/layout/source-packages.test.ts holds sources to it).
 */
export {
  type Database,
  type DatabaseOptions,
  type Db,
  driverOf,
  openDatabase,
  type Queryable,
  type Tx,
} from "./client.js";
export { isConnectionError, isDatabaseUnavailable, pgErrorCode } from "./pg-error.js";
export { executePrepared } from "./prepared.js";
