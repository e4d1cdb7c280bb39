import { COORDINATOR_LEADERSHIP } from "@drover/db";
import postgres from "postgres";

/** Every coordinator agrees on this key; whoever holds the advisory lock is the leader. */
const LEADER_LOCK_KEY = 0x6c656164; // "lead"

/** A leader silent this long loses the lease, unless the coordinator is configured otherwise. */
export const DEFAULT_LEADER_TIMEOUT_MS = 15_000;

export interface LeaderLease {
  /**
   * True while this process holds the lease: the last check found it held, and recently enough
   * (within half the leader timeout) that Postgres cannot have ended the lease's session since.
   */
  readonly held: boolean;
  /** Re-checks (and tries to take) the lease. Cheap: one round trip, given up after a third of the timeout. */
  refresh(): Promise<boolean>;
  release(): Promise<void>;
}

export interface LeaderLeaseOptions {
  /**
   * How long the leader may stay silent before it loses the lease: Postgres ends a lease session
   * idle this long (idle_session_timeout), which frees the lock for another coordinator. A leader
   * cut off from the database (a partition, a frozen process) keeps its TCP connection open on the
   * server's side for hours (kernel keepalive defaults), so without this nobody could take over.
   */
  timeoutMs?: number;
}

/**
 * Leadership is a session-level advisory lock on a dedicated connection: if the leader dies, its
 * backend goes with it, the lock frees, and the next coordinator to refresh takes over within one
 * reaper interval. A reconnect after a network blip gets a new backend without the lock, so every
 * refresh verifies the lock is held by this very backend, not merely that a query succeeded.
 *
 * A leader that cannot reach Postgres must stop acting as leader before another can be chosen:
 * its lease session ends after `timeoutMs` of silence, so it steps down on its own once a refresh
 * has not answered within a third of that, and its `held` lapses half-way, even while a refresh
 * hangs. Refreshes run at the reaper's interval, which the configuration keeps at most a third of
 * the timeout.
 */
export function leaderLease(
  url: string,
  self: { holder: string; address: string },
  options: LeaderLeaseOptions = {},
): LeaderLease {
  const timeoutMs = options.timeoutMs ?? DEFAULT_LEADER_TIMEOUT_MS;
  const sql = postgres(url, {
    max: 1,
    onnotice: () => {},
    // Idle, the session ends after the timeout; blocked sending an answer to a host cut off, the
    // same (tcp_user_timeout): either way the lock is free for another coordinator.
    connection: {
      application_name: "drover-leader",
      idle_session_timeout: timeoutMs,
      tcp_user_timeout: timeoutMs,
    },
  });
  let held = false;
  let confirmedAt = 0;
  const current = () => held && Date.now() - confirmedAt < timeoutMs / 2;
  const check = async () => {
    const [row] = await sql<{ held: boolean }[]>`
      select case
        when exists (select 1 from pg_locks where locktype = 'advisory' and pid = pg_backend_pid()
                       and objid = ${LEADER_LOCK_KEY} and granted) then true
        else pg_try_advisory_lock(${LEADER_LOCK_KEY}) end as held`;
    const now = row?.held === true;
    if (now && !held) {
      // Tell the other coordinators where budget leases go now.
      await sql`
        insert into drover.leadership (name, holder, address, updated_at)
        values (${COORDINATOR_LEADERSHIP}, ${self.holder}, ${self.address}, now())
        on conflict (name) do update set holder = excluded.holder, address = excluded.address, updated_at = now()`;
    }
    return now;
  };
  return {
    get held() {
      return current();
    },
    async refresh() {
      const asked = Date.now();
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<"late">((resolve) => {
        timer = setTimeout(() => resolve("late"), timeoutMs / 3);
      });
      const answer = check();
      try {
        const result = await Promise.race([answer, late]);
        if (result === "late") {
          // Unanswered: the session may be gone on the server's side already. A late answer is
          // nobody's any more; the next refresh asks again on the same (or a new) connection.
          answer.catch(() => {});
          held = false;
        } else {
          held = result;
          if (held) confirmedAt = asked;
        }
      } catch {
        held = false;
      } finally {
        clearTimeout(timer);
      }
      return current();
    },
    async release() {
      held = false;
      await sql`select pg_advisory_unlock_all()`.catch(() => {});
      await sql.end({ timeout: 5 });
    },
  };
}
