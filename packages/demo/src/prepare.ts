import { ensureDatabase, migrateDatabase } from "@drover/db";
import { checkServices } from "@drover/local-cluster";

/**
 * What every demo needs before it starts a cluster: Postgres and NATS answering, the database
 * there and migrated. Returns false, having said what is missing, when a service is not.
 */
export async function prepareDemoServices(databaseUrl: string, natsUrl: string): Promise<boolean> {
  const problems = await checkServices(databaseUrl, natsUrl);
  if (problems.length > 0) {
    process.stderr.write(`The demo needs Postgres and NATS JetStream:\n  - ${problems.join("\n  - ")}\n`);
    return false;
  }
  await ensureDatabase(databaseUrl);
  await migrateDatabase(databaseUrl);
  return true;
}
