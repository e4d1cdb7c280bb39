export { describeFailure, type Io, runCommand, USAGE, UsageError } from "./commands.js";
export { responseJson } from "./json-output.js";
export {
  countsTable,
  formatDuration,
  KindClock,
  kindDone,
  phaseLabel,
  progressBlock,
  rowsDone,
  runSummary,
  statusName,
  table,
  verificationTable,
} from "./render.js";
