export {
  type Database,
  type DatabaseOptions,
  type Db,
  driverOf,
  openDatabase,
  type Queryable,
  type Tx,
} from "./client.js";
export { DATABASE_START_WAIT_MS, ensureDatabase, untilDatabaseAnswers } from "./ensure-database.js";
export { COORDINATOR_LEADERSHIP, leaderAddress } from "./leadership.js";
export { MIGRATIONS_FOLDER, migrateDatabase } from "./migrate.js";
export { isConnectionError, isDatabaseUnavailable, pgErrorCode } from "./pg-error.js";
export { executePrepared } from "./prepared.js";
export * from "./schema/index.js";
export {
  runStatus,
  runStatusIn,
  taskStatus,
  taskStatusIn,
  verificationStatus,
  verificationStatusIn,
} from "./status-sql.js";
export * from "./statuses.js";
