/**
 * The contract a source implements, and what it may use to implement it: the provider's shape, the
 * contexts the engine hands in (with their capabilities), the error taxonomy, the source client.
 * Hand-picked: what the engine alone needs to drive sources is in ./engine.ts
 * (`@drover/provider-sdk/engine`). How to add a source: docs/sources.md.
 */

export type { BudgetPacer, PacedAnswer } from "./budget-pacer.js";
export { HeaderBudgetPacer } from "./budget-pacer.js";
export type {
  DryRunMatches,
  LedgerLookup,
  RecordIds,
  RunFacts,
  SeedCapabilities,
  SourceNote,
  VerifyCapabilities,
} from "./capabilities.js";
export { type DailyResetClues, dailyResetOf, nextMidnight, nextResetCandidate } from "./daily-reset.js";
export { isSweepCursor, type SweepCursor, sweepSeeds } from "./deletion-sweep.js";
export {
  classifyError,
  type ErrorClass,
  PermanentError,
  RateLimitedError,
  RowError,
  TransientError,
} from "./errors.js";
export {
  type BatchWriter,
  type CallsLeft,
  type DeferredLink,
  type EstimateContext,
  type HeldSlot,
  isRowErrorInfo,
  type LedgerMode,
  type ParentMap,
  type ProductRecords,
  type Provider,
  REDRIVE_SEED_KEY_PREFIX,
  type RecordLink,
  type RedriveReads,
  type RedriveRow,
  type RowErrorInfo,
  type RowRedrive,
  type RowResult,
  type RowWriter,
  type RunInfo,
  type SeedContext,
  type SourceDeletions,
  type SourceRow,
  type SourceWebhooks,
  type TaskContext,
  type TaskInfo,
  type TaskResult,
  type TaskSeed,
  type TaskTally,
  type WebhookTarget,
  type WorkEstimate,
  type WritableRow,
  type WriteOptions,
  type WriteSummary,
} from "./provider.js";
export { sleep } from "./sleep.js";
export type {
  BudgetReading,
  CallType,
  DailyReading,
  DailyResetSource,
  SourceAdapter,
  SourceAnswer,
} from "./source-adapter.js";
export { SourceClient, type SourceClientOptions } from "./source-client.js";
export {
  comparable,
  type KindVerification,
  type ProviderVerifier,
  type SampleEntry,
  type SampleMismatch,
  type SlotVerification,
  shownValue,
  type VerifyContext,
  withRetries,
} from "./verifier.js";
