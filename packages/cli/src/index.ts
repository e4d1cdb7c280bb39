export { describeFailure, EXIT, type Io, runCommand, USAGE, UsageError } from "./commands.js";
export { responseJson } from "./json-output.js";
export {
  COUNTS_LEGEND,
  countsLine,
  countsTable,
  fit,
  formatDuration,
  KindClock,
  kindDone,
  phaseLabel,
  progressBlock,
  rowsDone,
  runSummary,
  statusName,
  table,
  verificationSummary,
  verificationTable,
  visibleLength,
} from "./render.js";
