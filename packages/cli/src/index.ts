export { describeFailure, type Io, runCommand, USAGE, UsageError } from "./commands.js";
export {
  countsTable,
  formatDuration,
  kindDone,
  phaseLabel,
  progressBlock,
  rowsDone,
  runSummary,
  statusName,
  table,
} from "./render.js";
