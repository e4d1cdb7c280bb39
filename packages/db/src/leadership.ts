import { eq } from "drizzle-orm";
import type { Queryable } from "./client.js";
import { leadership } from "./schema/index.js";

/** The leadership row the coordinators contend for; its address is where budget calls go. */
export const COORDINATOR_LEADERSHIP = "coordinator";

/**
 * Where the leader coordinator listens, as it last announced (undefined before any announced).
 * The one lookup for it: non-leading coordinators forward budget calls there, and a worker whose
 * coordinator went away moves there.
 */
export async function leaderAddress(db: Queryable): Promise<string | undefined> {
  const [row] = await db
    .select({ address: leadership.address })
    .from(leadership)
    .where(eq(leadership.name, COORDINATOR_LEADERSHIP));
  return row?.address;
}
