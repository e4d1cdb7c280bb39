import { clientTlsProblems } from "@drover/auth";
import {
  address,
  intVar,
  type MetricsOptions,
  metricsHost,
  metricsOptions,
  metricsPort,
  parseEnv,
  z,
} from "@drover/config";

const schema = z.object({
  DROVER_DASHBOARD_ADDRESS: address("127.0.0.1:8080").describe(
    "Where the run page listens; `host:0` picks a free port (named in the ready line).",
  ),
  DROVER_COORDINATOR_ADDRESS: address("127.0.0.1:50051").describe(
    "The coordinator (any replica) the page's calls go to.",
  ),
  DROVER_TLS_CA_FILE: z
    .string()
    .optional()
    .meta({ shownDefault: "none (plaintext)" })
    .describe("TLS to the coordinator: the CA its certificate chains to."),
  DROVER_SHUTDOWN_GRACE_MS: intVar(0, 600_000, 5_000).describe(
    "On SIGTERM, live streams end at once and other open requests get this long.",
  ),
  DROVER_METRICS_PORT: metricsPort(9466),
  DROVER_METRICS_HOST: metricsHost(),
});

/** The run page's settings, as the configuration reference (docs/configuration.md) renders them. */
export const dashboardSettings = schema;

/** The dashboard's settings, compiled once from its environment (loadDashboardConfig). */
export interface DashboardConfig {
  address: string;
  coordinatorAddress: string;
  tls: { caFile?: string };
  shutdownGraceMs: number;
  metrics: MetricsOptions;
}

/**
 * The dashboard holds no credential of its own: the operator's API key comes with each request from
 * the page and goes on to the coordinator, whose scopes then apply.
 */
export function loadDashboardConfig(env: NodeJS.ProcessEnv = process.env): DashboardConfig {
  const config = parseEnv(schema, env, (e) => clientTlsProblems({ caFile: e.DROVER_TLS_CA_FILE }));
  return {
    address: config.DROVER_DASHBOARD_ADDRESS,
    coordinatorAddress: config.DROVER_COORDINATOR_ADDRESS,
    tls: { caFile: config.DROVER_TLS_CA_FILE },
    shutdownGraceMs: config.DROVER_SHUTDOWN_GRACE_MS,
    metrics: metricsOptions(config),
  };
}
