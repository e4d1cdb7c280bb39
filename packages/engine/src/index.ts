export { retryDelayMs } from "./backoff.js";
export { resolveDeferredLinks } from "./deferred-links.js";
export {
  MATCHED_BY,
  MISSING_PARENT,
  NO_PARENT,
  recordWouldBeRows,
  rolledBackInDryRun,
  type WouldBeRow,
  wouldBeRows,
} from "./dry-run.js";
export { LiveRunConflict, type LiveRunScope } from "./live-run-conflict.js";
export {
  closeMigration,
  ledgerRows,
  MigrationClosed,
  MigrationLive,
  openClosure,
  removeClosedLedgers,
  reopenMigration,
} from "./migration-closures.js";
export { appendNotes, type NoteInput } from "./notes.js";
export {
  describeDependent,
  findRevertDependents,
  REVERT_WINDOW_SIZE,
  type RevertDependent,
  revertPlan,
  runRevertTask,
} from "./revert.js";
export { readRunFact, settleRunFact } from "./run-facts.js";
export {
  openSourceSecret,
  sourceSecretContext,
  storeResealedSecret,
  storeSealedLegacySecret,
  toRunInfo,
} from "./run-info.js";
export { type ProgressDeps, progressRun, type RunProgress } from "./run-progress.js";
export {
  admitRevertRun,
  admitRun,
  advanceBarrier,
  closeFollowPass,
  type FollowStep,
  finalizeRun,
  type NewRun,
  passIntervalSeconds,
  pruneFinishedRuns,
  RunAlreadyReverted,
  rearmRun,
  redriveRun,
  requestCutover,
  requestStop,
  runsToAdvance,
  settleStoppingRun,
} from "./run-transitions.js";
export { estimateContext, seedContext } from "./source-capabilities.js";
export {
  type KindVerificationResult,
  type VerificationResult,
  type VerifyRunOptions,
  verifyRun,
} from "./source-comparison.js";
export { type ApplyDeletionsDeps, applySourceDeletions, heldSourceRows } from "./source-deletions.js";
export {
  type KindTaskCounts,
  taskCountsByKind,
  taskCountsByStatus,
  taskTallies,
  unfinishedKindTasks,
} from "./task-counts.js";
export {
  type DispatchSlice,
  dispatchLock,
  type HandedOn,
  handOnLockedSlot,
  handOnSlot,
  markRunDeficits,
  markTasksDispatched,
  overFairShare,
  type RunDemandRow,
  recordFairShares,
  redispatchLostTasks,
  runDemand,
  runDispatchLock,
  runSlice,
  slicePool,
  undispatchTasks,
  WHOLE_POOL,
  yieldSlot,
} from "./task-dispatch.js";
export {
  type AssignmentControls,
  type AssignmentOutcome,
  type HeldClaim,
  runAssignment,
  type TaskRunnerDeps,
  TOUCH_EVERY_MS,
} from "./task-runner.js";
export {
  type Checkpoint,
  cancelPendingTask,
  cancelPendingTasksOfRun,
  claimTask,
  DeadWorkerError,
  finishTaskCancelled,
  finishTaskFailed,
  finishTaskSucceeded,
  handBackHeldTasks,
  handBackTask,
  insertTaskSeeds,
  LostClaimError,
  parkSiblings,
  parkTask,
  rearmTasks,
  releaseStaleTasks,
  releaseTask,
  releaseTasksOfDeadWorkers,
  touchTask,
  writeCheckpoint,
} from "./task-transitions.js";
export { runVerification, type VerificationOutcome } from "./verification-assignment.js";
export {
  claimVerification,
  deferVerification,
  dueVerifications,
  handBackVerification,
  requestAutomaticVerifications,
  requestVerificationNow,
  storedVerificationJson,
  storeVerification,
  touchVerification,
  unmarkVerificationPublished,
  VERIFICATION_MAX_ATTEMPTS,
  VERIFICATION_STALE_MS,
  type VerificationClaim,
  type VerificationRequestState,
  verificationRequestState,
} from "./verification-transitions.js";
export type { WindowWriterDeps } from "./window-deps.js";
export { addSummary, emptySummary } from "./window-tally.js";
export {
  DESTINATION_PROBE_MS,
  destinationWindow,
  WINDOW_DEADLINE_MS,
  WINDOW_IDLE_MS,
  WindowDeadlineError,
  windowTransaction,
} from "./window-transaction.js";
export {
  BATCH_WINDOW_SIZE,
  MAX_SAVEPOINTS_PER_TRANSACTION,
  SavepointLimitError,
  TaskCancelledError,
  WINDOW_SIZE,
  writeBatches,
  writeRows,
} from "./window-writer.js";
export { heartbeatWorker, liveLaneSlots, registerWorker, removeWorker } from "./worker-liveness.js";
