import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { budgetReportRequest, ReportBudgetRequestSchema, readBudgetReport } from "../src/index.js";

const account = { source: "crm", sourceAccount: "acct", workerId: "w" };

describe("a budget report on the wire", () => {
  it("carries the daily count and its reset together, and reads back as it was built", () => {
    const report = {
      spent: 42,
      burstCapacity: 20,
      daily: { remaining: 10, resetAt: new Date("2026-12-02T00:00:00Z") },
      blockedUntil: new Date("2026-12-01T17:00:02Z"),
    };
    const request = create(ReportBudgetRequestSchema, budgetReportRequest(account, report));
    expect(request.dailyRemaining).toBe(10n);
    expect(request.dailyResetAt).toBeDefined();
    expect(readBudgetReport(request)).toEqual(report);
  });

  it("carries a guessed reset with the daily count, and the day's whole allowance", () => {
    const report = {
      spent: 0,
      daily: { remaining: 0, resetAt: new Date("2026-12-01T18:00:00Z"), guessed: true },
      dailyLimit: 600_000,
    };
    const request = create(ReportBudgetRequestSchema, budgetReportRequest(account, report));
    expect(request.dailyResetGuessed).toBe(true);
    expect(request.dailyLimit).toBe(600_000n);
    expect(readBudgetReport(request)).toMatchObject(report);
  });

  it("leaves out what did not change", () => {
    const request = create(ReportBudgetRequestSchema, budgetReportRequest(account, { spent: 2 }));
    expect(request.dailyRemaining).toBeUndefined();
    expect(request.dailyResetAt).toBeUndefined();
    expect(readBudgetReport(request)).toEqual({
      spent: 2,
      burstCapacity: undefined,
      daily: undefined,
      blockedUntil: undefined,
    });
  });

  it("is refused with a count but no reset, or a negative increment", () => {
    const half = create(ReportBudgetRequestSchema, { ...account, spent: 0n, dailyRemaining: 5n });
    expect(readBudgetReport(half)).toEqual({
      problem: "daily_remaining and daily_reset_at are reported together or not at all",
    });
    const negative = create(ReportBudgetRequestSchema, { ...account, spent: -1n });
    expect(readBudgetReport(negative)).toEqual({ problem: "spent is an increment and cannot be negative" });
  });
});
