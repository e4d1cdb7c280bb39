import type { SecretKeyring } from "@drover/auth";
import type { RunService, ServiceImplementation } from "@drover/proto";
import type { CoordinatorContext } from "./context.js";
import { migrationControl } from "./migration-close.js";
import { runAudit } from "./run-audit.js";
import { runControl } from "./run-control.js";
import { runExplain } from "./run-explain.js";
import { runQueries } from "./run-queries.js";
import type { Verifications } from "./verification-dispatch.js";

/**
 * The public API, in four parts: run control (run-control.ts), run queries (run-queries.ts),
 * explain (run-explain.ts) and the audit trail (run-audit.ts; recorded by audit-interceptor.ts). Every call arrives authenticated (auth.ts); a tenant-scoped caller sees
 * and steers only its own tenants' runs, and another tenant's run is NOT_FOUND.
 */
export function runService(
  ctx: CoordinatorContext,
  secrets: SecretKeyring,
  verifications: Verifications,
): ServiceImplementation<typeof RunService> {
  return {
    ...runControl(ctx, secrets),
    ...runQueries(ctx),
    ...runExplain(ctx, verifications),
    ...runAudit(ctx),
    ...migrationControl(ctx),
  };
}
