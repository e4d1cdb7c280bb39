import { connect } from "@nats-io/transport-node";
import postgres from "postgres";

/**
 * Checks that Postgres and NATS answer, and says exactly how to start whichever does not.
 * Returns the problems; empty means ready.
 */
export async function checkServices(databaseUrl: string, natsUrl: string): Promise<string[]> {
  const problems: string[] = [];
  const admin = new URL(databaseUrl);
  admin.pathname = "/postgres";
  const sql = postgres(admin.toString(), { max: 1, connect_timeout: 3, onnotice: () => {} });
  try {
    await sql`select 1`;
  } catch (err) {
    problems.push(
      `Postgres does not answer at ${admin.host} (${(err as Error).message}).\n` +
        "    Start it with:  bash infra/scripts/start-services.sh\n" +
        "    or with Docker: docker compose -f infra/compose.yaml up -d\n" +
        "    or point DATABASE_URL at yours.",
    );
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {});
  }
  try {
    const nc = await connect({
      servers: natsUrl.split(",").map((s) => s.trim()),
      timeout: 3_000,
      maxReconnectAttempts: 0,
    });
    const reply = await nc.request("$JS.API.INFO", "", { timeout: 3_000 });
    const info = JSON.parse(new TextDecoder().decode(reply.data)) as { error?: { description?: string } };
    if (info.error)
      problems.push(
        `NATS at ${natsUrl} answers but JetStream is off (${info.error.description}); start nats-server with -js.`,
      );
    await nc.close();
  } catch (err) {
    problems.push(
      `NATS with JetStream does not answer at ${natsUrl} (${(err as Error).message}).\n` +
        "    Start it with:  bash infra/scripts/start-services.sh\n" +
        "    or with Docker: docker compose -f infra/compose.yaml up -d\n" +
        "    or point NATS_URL at yours.",
    );
  }
  return problems;
}
