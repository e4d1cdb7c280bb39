export {
  type AccountingScope,
  accountFor,
  accountingProblems,
  CRM_TABLES,
  HUBSPOT_TABLES,
  type KindAccount,
  type KindTruth,
} from "./accounting.js";
export {
  type Cluster,
  type ClusterOptions,
  EMPTY_CRM_SANDBOX,
  type SandboxSource,
  startCluster,
} from "./cluster.js";
export {
  createSourceDatabase,
  generateRoomEvents,
  type RoomEventsOptions,
  type SourceDatabase,
} from "./room-events.js";
export {
  REPO_ROOT,
  type RunFrom,
  runFrom,
  type ServiceProcess,
  type SpawnOptions,
  spawnService,
} from "./service-process.js";
export {
  COORDINATOR,
  DASHBOARD,
  NODE_ARGS,
  SERVICES,
  type ServiceName,
  type ServicePort,
  type ServiceProbe,
  type ServiceSpec,
  serviceEnv,
  servicePort,
  startCommand,
  terminationGraceSeconds,
  WORKER,
} from "./service-spec.js";
export { checkServices } from "./services-check.js";
