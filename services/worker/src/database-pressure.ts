import type { Db } from "@drover/db";
import { sql } from "drizzle-orm";

/**
 * The default signal: the share of the server's connection slots in active use. A migration must
 * never be what takes the product's database down, so above the threshold workers stop claiming.
 */
export const ACTIVE_CONNECTIONS_RATIO = `
  select (select count(*) from pg_stat_activity where state = 'active')::float8
         / (select setting::float8 from pg_settings where name = 'max_connections') as value`;

export interface PressureOptions {
  /** A query returning one row with a numeric `value`. */
  query: string;
  /** Pressure is on when value exceeds this. */
  threshold: number;
  /** A reading is reused for this long, so a burst of messages costs one query. */
  cacheMs?: number;
}

export interface PressureGauge {
  /** True when the destination database is under pressure. A failing probe reads as no pressure. */
  underPressure(): Promise<boolean>;
  readonly lastValue: number | undefined;
}

export function pressureGauge(db: Db, options: PressureOptions): PressureGauge {
  let last: { at: number; value: number } | undefined;
  let inflight: Promise<number> | undefined;
  const probe = async () => {
    const rows = await db.execute<{ value: number | string | null }>(sql.raw(options.query));
    const value = Number(rows[0]?.value ?? 0);
    last = { at: Date.now(), value: Number.isFinite(value) ? value : 0 };
    return last.value;
  };
  return {
    get lastValue() {
      return last?.value;
    },
    async underPressure() {
      const fresh = last && Date.now() - last.at < (options.cacheMs ?? 2_000);
      let value: number;
      if (fresh) value = last!.value;
      else {
        inflight ??= probe().finally(() => {
          inflight = undefined;
        });
        // The probe is advisory: if it fails, the claim's own queries will meet the real problem.
        value = await inflight.catch(() => 0);
      }
      return value > options.threshold;
    },
  };
}
