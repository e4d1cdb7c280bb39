import { describe, expect, it } from "vitest";
import { describeError, destinationTimeout, repeatsInPlace } from "../src/engine.js";
import { classifyError, PermanentError, RateLimitedError, RowError, TransientError } from "../src/index.js";

function pgError(code: string, message = "boom") {
  const driver = Object.assign(new Error(message), { code, name: "PostgresError" });
  // drizzle wraps the driver's error and hides its code: classification must dig.
  return Object.assign(new Error(`Failed query: insert ...`), { cause: driver });
}

describe("error taxonomy", () => {
  it("keeps the class a typed error was thrown with", () => {
    expect(classifyError(new TransientError("x"))).toBe("transient");
    expect(classifyError(new RateLimitedError("x", new Date()))).toBe("rate_limited");
    expect(classifyError(new PermanentError("x"))).toBe("permanent");
    expect(classifyError(new RowError("x"))).toBe("row");
  });

  it("treats deadlocks, serialization failures and terminated backends as transient, through drizzle's wrapper", () => {
    for (const code of ["40P01", "40001", "57P01", "08006"])
      expect(classifyError(pgError(code))).toBe("transient");
  });

  it("treats a cancelled statement, an idle-in-transaction timeout and a server out of disk or memory as transient", () => {
    for (const code of ["57014", "25P03", "53100", "53200"])
      expect(classifyError(pgError(code))).toBe("transient");
  });

  it("treats constraint and data errors as the row's own", () => {
    for (const code of ["23505", "23502", "23503", "22P02", "22001"])
      expect(classifyError(pgError(code))).toBe("row");
  });

  it("treats a dropped connection and a failed fetch as transient", () => {
    expect(classifyError(Object.assign(new Error("gone"), { code: "CONNECTION_CLOSED" }))).toBe("transient");
    expect(
      classifyError(
        new TypeError("fetch failed", { cause: Object.assign(new Error(), { code: "ECONNREFUSED" }) }),
      ),
    ).toBe("transient");
  });

  it("lets the source client repeat in place only a transient failure marked repeatable where it was thrown", () => {
    expect(repeatsInPlace(new TransientError("503", { repeatable: true }))).toBe(true);
    // A transient error says nothing of a resend unless its thrower did: a timeout, a database error.
    expect(repeatsInPlace(new TransientError("timed out"))).toBe(false);
    expect(repeatsInPlace(new RateLimitedError("429", new Date()))).toBe(false);
    expect(repeatsInPlace(new PermanentError("404"))).toBe(false);
    expect(repeatsInPlace(new RowError("bad row"))).toBe(false);
    expect(repeatsInPlace(pgError("40P01"))).toBe(false);
  });

  it("treats an unknown error as permanent rather than retrying it forever", () => {
    expect(classifyError(new Error("a bug"))).toBe("permanent");
    expect(classifyError("a string")).toBe("permanent");
  });

  it("describes a database error by the driver's message and SQLSTATE, not the query", () => {
    expect(describeError(pgError("23502", 'null value in column "name"'))).toBe(
      'null value in column "name" (SQLSTATE 23502)',
    );
    expect(describeError(new Error("x".repeat(600)))).toHaveLength(500);
  });

  it("reads the server's lock and statement timeouts as the destination's stall, with the table its context names, and an operator's cancel as neither", () => {
    const lockWait = pgError("55P03", "canceling statement due to lock timeout");
    Object.assign(lockWait.cause as object, { where: 'while updating tuple (0,1) in relation "companies"' });
    expect(destinationTimeout(lockWait)).toEqual({
      sqlstate: "55P03",
      table: "companies",
      message: "canceling statement due to lock timeout",
    });
    expect(
      destinationTimeout(pgError("57014", "canceling statement due to statement timeout")),
    ).toMatchObject({
      sqlstate: "57014",
    });
    expect(destinationTimeout(pgError("57014", "canceling statement due to user request"))).toBeUndefined();
    expect(destinationTimeout(pgError("40P01"))).toBeUndefined();
  });
});
