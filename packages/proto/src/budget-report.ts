import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ReportBudgetRequest, ReportBudgetRequestSchema } from "./gen/drover/v1/worker_service_pb.js";

/** The daily allowance as a source answer stated it: the count and when it is whole again, together. */
export interface DailyAllowance {
  remaining: number;
  resetAt: Date;
  /** Nothing stated the reset: resetAt is a guess the coordinator replaces by its probe schedule. */
  guessed?: boolean | undefined;
  /** resetAt is the account's rule: a hint, which the coordinator checks against the source. */
  ruled?: boolean | undefined;
  /** The length of the account's day (ms), when known: the grid of the coordinator's probes. */
  periodMs?: number | undefined;
}

/**
 * What a worker read of one account's budget since its last report: only the readings that
 * changed, `spent` as an increment.
 */
export interface BudgetReport {
  burstCapacity?: number | undefined;
  daily?: DailyAllowance | undefined;
  /** The day's whole allowance in token units, when the source states it. */
  dailyLimit?: number | undefined;
  /** Token units of granted slots that went unused (late, or taken back by a wall): an increment. */
  unused?: number | undefined;
  /** With unused: the earliest of those slots' instants (a slot of a day already over is not given back). */
  unusedFrom?: Date | undefined;
  /** A refusal: nothing may be sent to the account before this. */
  blockedUntil?: Date | undefined;
  spent: number;
}

export interface BudgetReportAccount {
  source: string;
  sourceAccount: string;
  workerId: string;
  /** The run the reporting pacer leases for, if it leases per run. */
  runId?: string | undefined;
}

/**
 * The ReportBudget request, built from typed readings. `daily_remaining` and `daily_reset_at`
 * travel as one reading: a count without its reset left the coordinator unable to say when the
 * allowance returns, so its "exhausted" answer never fired.
 */
export function budgetReportRequest(
  account: BudgetReportAccount,
  report: BudgetReport,
): MessageInitShape<typeof ReportBudgetRequestSchema> {
  return {
    ...account,
    spent: BigInt(report.spent),
    ...(report.burstCapacity !== undefined ? { burstCapacity: report.burstCapacity } : {}),
    ...(report.daily
      ? {
          dailyRemaining: BigInt(report.daily.remaining),
          dailyResetAt: timestampFromDate(report.daily.resetAt),
          ...(report.daily.guessed ? { dailyResetGuessed: true } : {}),
          ...(report.daily.ruled ? { dailyResetRuled: true } : {}),
          ...(report.daily.periodMs ? { dailyPeriodMs: BigInt(report.daily.periodMs) } : {}),
        }
      : {}),
    ...(report.dailyLimit !== undefined ? { dailyLimit: BigInt(report.dailyLimit) } : {}),
    ...(report.unused ? { unused: BigInt(report.unused) } : {}),
    ...(report.unused && report.unusedFrom ? { unusedFrom: timestampFromDate(report.unusedFrom) } : {}),
    ...(report.blockedUntil ? { blockedUntil: timestampFromDate(report.blockedUntil) } : {}),
  };
}

/** The readings of a ReportBudget request, or what is wrong with it (a daily count without its reset). */
export function readBudgetReport(req: ReportBudgetRequest): BudgetReport | { problem: string } {
  if ((req.dailyRemaining === undefined) !== (req.dailyResetAt === undefined)) {
    return { problem: "daily_remaining and daily_reset_at are reported together or not at all" };
  }
  if (req.spent < 0n) return { problem: "spent is an increment and cannot be negative" };
  if (req.unused < 0n) return { problem: "unused is an increment and cannot be negative" };
  if (req.dailyLimit !== undefined && req.dailyLimit < 0n)
    return { problem: "daily_limit cannot be negative" };
  return {
    spent: Number(req.spent),
    burstCapacity: req.burstCapacity,
    daily:
      req.dailyRemaining !== undefined && req.dailyResetAt
        ? {
            remaining: Number(req.dailyRemaining),
            resetAt: timestampDate(req.dailyResetAt),
            guessed: req.dailyResetGuessed || undefined,
            ruled: req.dailyResetRuled || undefined,
            periodMs:
              req.dailyPeriodMs !== undefined && req.dailyPeriodMs > 0n
                ? Number(req.dailyPeriodMs)
                : undefined,
          }
        : undefined,
    blockedUntil: req.blockedUntil ? timestampDate(req.blockedUntil) : undefined,
    ...(req.dailyLimit !== undefined ? { dailyLimit: Number(req.dailyLimit) } : {}),
    ...(req.unused > 0n ? { unused: Number(req.unused) } : {}),
    ...(req.unused > 0n && req.unusedFrom ? { unusedFrom: timestampDate(req.unusedFrom) } : {}),
  };
}
