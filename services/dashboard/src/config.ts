import { clientTlsProblems } from "@drover/auth";
import { address, intVar, metricsHost, metricsPort, parseEnv, z } from "@drover/config";

const schema = z.object({
  /** Where the run page listens; `host:0` picks a free port (the ready line names it). */
  DROVER_DASHBOARD_ADDRESS: address("127.0.0.1:8080"),
  /** The coordinator (any replica) the page's calls go to. */
  DROVER_COORDINATOR_ADDRESS: address("127.0.0.1:50051"),
  /** TLS to the coordinator: the CA its certificate chains to (plaintext without it). */
  DROVER_TLS_CA_FILE: z.string().optional(),
  /** How long a SIGTERM waits for open requests (live streams are closed at once). */
  DROVER_SHUTDOWN_GRACE_MS: intVar(0, 600_000, 5_000),
  /** Prometheus metrics at http://DROVER_METRICS_HOST:DROVER_METRICS_PORT/metrics (`off` for none). */
  DROVER_METRICS_PORT: metricsPort(9466),
  DROVER_METRICS_HOST: metricsHost(),
});

export type DashboardConfig = z.infer<typeof schema>;

/**
 * The dashboard holds no credential of its own: the operator's API key comes with each request from
 * the page and goes on to the coordinator, whose scopes then apply.
 */
export function loadDashboardConfig(env: NodeJS.ProcessEnv = process.env): DashboardConfig {
  return parseEnv(schema, env, (e) => clientTlsProblems({ caFile: e.DROVER_TLS_CA_FILE }));
}
