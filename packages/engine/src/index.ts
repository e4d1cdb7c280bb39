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
  rearmRun,
  redriveRun,
  requestCutover,
  requestStop,
  settleStoppingRun,
} from "./run-transitions.js";
export {
  type KindVerificationResult,
  type VerificationResult,
  type VerifyRunOptions,
  verifyRun,
} from "./source-comparison.js";
export { type ApplyDeletionsDeps, applySourceDeletions, heldSourceRows } from "./source-deletions.js";
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
  DISPATCH_LOCK,
  finishTaskCancelled,
  finishTaskFailed,
  finishTaskSucceeded,
  handBackHeldTasks,
  handBackTask,
  handOnSlot,
  insertTaskSeeds,
  LostClaimError,
  markTasksDispatched,
  overFairShare,
  parkSiblings,
  parkTask,
  rearmTasks,
  recordFairShares,
  redispatchLostTasks,
  releaseStaleTasks,
  releaseTask,
  releaseTasksOfDeadWorkers,
  runDispatchLock,
  touchTask,
  undispatchTasks,
  writeCheckpoint,
  yieldSlot,
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
export {
  WINDOW_DEADLINE_MS,
  WINDOW_IDLE_MS,
  WindowDeadlineError,
  windowTransaction,
} from "./window-transaction.js";
export {
  addSummary,
  BATCH_WINDOW_SIZE,
  DESTINATION_PROBE_MS,
  emptySummary,
  MAX_SAVEPOINTS_PER_TRANSACTION,
  SavepointLimitError,
  TaskCancelledError,
  WINDOW_SIZE,
  type WindowWriterDeps,
  writeBatches,
  writeRows,
} from "./window-writer.js";
export { heartbeatWorker, liveLaneSlots, registerWorker, removeWorker } from "./worker-liveness.js";
