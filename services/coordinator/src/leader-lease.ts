import { COORDINATOR_LEADERSHIP } from "@drover/db";
import postgres from "postgres";

/** Every coordinator agrees on this key; whoever holds the advisory lock is the leader. */
const LEADER_LOCK_KEY = 0x6c656164; // "lead"

export interface LeaderLease {
  /** True while this process holds the lease, as of the last check. */
  readonly held: boolean;
  /** Re-checks (and tries to take) the lease. Cheap: one round trip. */
  refresh(): Promise<boolean>;
  release(): Promise<void>;
}

/**
 * Leadership is a session-level advisory lock on a dedicated connection: if the leader dies, its
 * backend goes with it, the lock frees, and the next coordinator to refresh takes over within one
 * reaper interval. A reconnect after a network blip gets a new backend without the lock, so every
 * refresh verifies the lock is held by this very backend, not merely that a query succeeded.
 */
export function leaderLease(url: string, self: { holder: string; address: string }): LeaderLease {
  const sql = postgres(url, {
    max: 1,
    onnotice: () => {},
    connection: { application_name: "drover-leader" },
  });
  let held = false;
  return {
    get held() {
      return held;
    },
    async refresh() {
      try {
        const [row] = await sql<{ held: boolean }[]>`
          select case
            when exists (select 1 from pg_locks where locktype = 'advisory' and pid = pg_backend_pid()
                           and objid = ${LEADER_LOCK_KEY} and granted) then true
            else pg_try_advisory_lock(${LEADER_LOCK_KEY}) end as held`;
        const was = held;
        held = row?.held === true;
        if (held && !was) {
          // Tell the other coordinators where budget leases go now.
          await sql`
            insert into drover.leadership (name, holder, address, updated_at)
            values (${COORDINATOR_LEADERSHIP}, ${self.holder}, ${self.address}, now())
            on conflict (name) do update set holder = excluded.holder, address = excluded.address, updated_at = now()`;
        }
      } catch {
        held = false;
      }
      return held;
    },
    async release() {
      held = false;
      await sql`select pg_advisory_unlock_all()`.catch(() => {});
      await sql.end({ timeout: 5 });
    },
  };
}
