export { type DashboardConfig, loadDashboardConfig } from "./config.js";
export { type Dashboard, type DashboardOptions, startDashboard } from "./dashboard.js";
export { type Problem, problemFor, sentence } from "./http-errors.js";
export {
  type NoteGroupJson,
  type RunJson,
  runJson,
  type ThroughputJson,
  throughputJson,
} from "./run-json.js";
