/** @drover/config: the settings' building blocks (env.ts) and the settings every service shares. */
export {
  address,
  ConfigError,
  identifier,
  intVar,
  type MetricsOptions,
  metricsHost,
  metricsOptions,
  metricsPort,
  parseEnv,
  postgresUrl,
  z,
} from "./env.js";
export { NATS_SETTINGS, natsServers, streamReplicas } from "./nats.js";
export { runServiceMain, type ServiceMain } from "./service-main.js";
export {
  type KeyringOptions,
  keyringOptions,
  SHARED_SETTINGS,
  type SharedOptions,
  type SharedSettings,
  settingsDisagreements,
  sharedOptions,
} from "./shared-settings.js";
export {
  effectiveTouchMs,
  MIN_TOUCHES_PER_STALE,
  staleTaskMs,
  taskLockProblems,
  taskTouchMs,
} from "./task-lock.js";
