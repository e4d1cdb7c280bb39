export { type DashboardConfig, loadDashboardConfig } from "./config.js";
export { type Dashboard, type DashboardOptions, startDashboard } from "./dashboard.js";
export { type Problem, problemFor, sentence } from "./http-errors.js";
export {
  type BudgetFact,
  budgetFacts,
  type NoteGroupJson,
  type RunJson,
  runJson,
  type ThroughputJson,
  throughputJson,
  type VerificationJson,
} from "./run-json.js";
