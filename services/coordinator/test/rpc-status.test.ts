import { LiveRunConflict, RunAlreadyReverted } from "@drover/engine";
import { Code, isRpcError } from "@drover/proto";
import { describe, expect, it } from "vitest";
import { InvalidInput, NotFound, Precondition, StillWorking, Unavailable } from "../src/domain-errors.js";
import { domainErrorsAtEdge, toRpcError } from "../src/rpc-status.js";

describe("the gRPC edge's one table of domain errors", () => {
  it("gives each domain error its status code, its reason and the values it names", () => {
    const cases: [Error, Code, Record<string, string>][] = [
      [new NotFound("run x no longer exists", "RUN_NOT_FOUND"), Code.NOT_FOUND, { reason: "RUN_NOT_FOUND" }],
      [new InvalidInput("run_id is required"), Code.INVALID_ARGUMENT, { reason: "INVALID_INPUT" }],
      [
        new Precondition("run x was reverted by run y", "RUN_REVERTED", { reverted_by: "y" }),
        Code.FAILED_PRECONDITION,
        { reason: "RUN_REVERTED", reverted_by: "y" },
      ],
      [
        new Unavailable("no coordinator leads yet", "NO_LEADER", 1_000),
        Code.UNAVAILABLE,
        { reason: "NO_LEADER", retry_after_ms: "1000" },
      ],
      [
        new Unavailable("stopping", "COORDINATOR_STOPPING"),
        Code.UNAVAILABLE,
        { reason: "COORDINATOR_STOPPING" },
      ],
      [
        new StillWorking("still being verified", "VERIFICATION_RUNNING"),
        Code.DEADLINE_EXCEEDED,
        { reason: "VERIFICATION_RUNNING" },
      ],
    ];
    for (const [err, code, details] of cases) {
      const sent = toRpcError(err);
      expect(isRpcError(sent), err.name).toBe(true);
      expect(sent, err.name).toMatchObject({ code, message: err.message, details });
    }
  });

  it("sends the engine's live-run conflict as ALREADY_EXISTS naming the live run, and a second revert naming the first", () => {
    const scope = { tenantId: "t", source: "crm", sourceAccount: "a" };
    expect(toRpcError(new LiveRunConflict(scope, { id: "r1", status: "running" }))).toMatchObject({
      code: Code.ALREADY_EXISTS,
      details: { reason: "LIVE_RUN_EXISTS", run_id: "r1" },
    });
    expect(toRpcError(new LiveRunConflict(scope, undefined))).toMatchObject({
      details: { reason: "LIVE_RUN_EXISTS" },
    });
    expect(toRpcError(new RunAlreadyReverted("r1", "r2"))).toMatchObject({
      code: Code.FAILED_PRECONDITION,
      details: { reason: "RUN_REVERTED", reverted_by: "r2" },
    });
  });

  it("leaves what is not the domain's to the bridge (an unexpected error stays unexpected: INTERNAL there)", async () => {
    const bug = new TypeError("x is undefined");
    expect(toRpcError(bug)).toBe(bug);
    const call = {} as Parameters<typeof domainErrorsAtEdge>[0];
    await expect(
      domainErrorsAtEdge(
        call,
        () => Promise.reject(bug),
        () => ({}),
      ),
    ).rejects.toBe(bug);
    await expect(
      domainErrorsAtEdge(
        call,
        () => Promise.reject(new InvalidInput("bad")),
        () => ({}),
      ),
    ).rejects.toMatchObject({ code: Code.INVALID_ARGUMENT });
  });
});
