export {
  type AccountingScope,
  accountFor,
  accountingProblems,
  CRM_TABLES,
  type KindAccount,
  type KindTruth,
} from "./accounting.js";
export { type Cluster, type ClusterOptions, startCluster } from "./cluster.js";
export { REPO_ROOT, type ServiceProcess, type SpawnOptions, spawnService } from "./service-process.js";
export { checkServices } from "./services-check.js";
