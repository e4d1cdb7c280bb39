export { describeFailure, type Io, runCommand, USAGE, UsageError } from "./commands.js";
export { countsTable, formatDuration, progressBlock, runSummary, statusName } from "./render.js";
