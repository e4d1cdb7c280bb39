import { fileURLToPath } from "node:url";
import { drizzle } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import postgres from "postgres";

export const MIGRATIONS_FOLDER = fileURLToPath(new URL("../drizzle", import.meta.url));

/** Any constant works as long as every Drover process agrees on it. */
const MIGRATION_LOCK_KEY = 0x64726f76; // "drov"

/**
 * Applies pending migrations. drizzle's migrator takes no lock, and replicas booting together
 * raced each other into 23505 on its journal table; so the whole migration runs on one dedicated
 * connection holding a session advisory lock. Latecomers wait, then find nothing left to do.
 */
export async function migrateDatabase(url: string): Promise<void> {
  const sql = postgres(url, {
    max: 1,
    onnotice: () => {},
    connection: { application_name: "drover-migrate" },
  });
  try {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK_KEY})`;
    try {
      await migrate(drizzle(sql), { migrationsFolder: MIGRATIONS_FOLDER });
    } finally {
      await sql`select pg_advisory_unlock(${MIGRATION_LOCK_KEY})`;
    }
  } finally {
    await sql.end({ timeout: 5 });
  }
}
