import { credentials, Metadata, Client as RawClient, type ServiceError } from "@grpc/grpc-js";
import { afterEach, describe, expect, it } from "vitest";
import {
  type CallContext,
  Code,
  create,
  createClient,
  isRpcError,
  methodPath,
  RpcError,
  RunSchema,
  RunService,
  RunStatus,
  timestampDate,
  timestampFromDate,
} from "../src/index.js";
import { eventually, type Harness, serve, sleep } from "./harness.js";

let harness: Harness<typeof RunService> | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const createdAt = new Date("2024-05-01T12:00:00Z");

function run(id: string, status = RunStatus.RUNNING) {
  return create(RunSchema, {
    id,
    tenantId: "t1",
    status,
    kinds: ["deals"],
    createdAt: timestampFromDate(createdAt),
  });
}

async function rejection(promise: Promise<unknown>): Promise<RpcError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!isRpcError(err)) throw new Error(`expected an RpcError, got ${String(err)}`);
  return err;
}

describe("RunService over the bridge", () => {
  it("round-trips a unary call", async () => {
    let seen: CallContext | undefined;
    harness = await serve(RunService, {
      async getRun(request, ctx) {
        seen = ctx;
        return { run: run(request.runId) };
      },
    });
    const deadline = new Date(Date.now() + 5000);
    const response = await harness.client.getRun({ runId: "r-1" }, { deadline });
    expect(response.$typeName).toBe("drover.v1.GetRunResponse");
    expect(response.run?.id).toBe("r-1");
    expect(response.run?.status).toBe(RunStatus.RUNNING);
    expect(response.run?.kinds).toEqual(["deals"]);
    expect(timestampDate(response.run!.createdAt!)).toEqual(createdAt);
    expect(seen?.method).toBe("drover.v1.RunService/GetRun");
    expect(seen?.peer).toMatch(/127\.0\.0\.1/);
    expect(Math.abs(seen!.deadline!.getTime() - deadline.getTime())).toBeLessThan(1000);
    expect(seen?.signal.aborted).toBe(false);
  });

  it("streams WatchRun and stops the server iteration when the client breaks out", async () => {
    let producedAfterCancel = 0;
    let handlerFinished = false;
    let signal: AbortSignal | undefined;
    harness = await serve(RunService, {
      async *watchRun(request, ctx) {
        signal = ctx.signal;
        try {
          for (let i = 0; ; i++) {
            if (ctx.signal.aborted) producedAfterCancel++;
            yield { run: { ...run(request.runId), currentPhase: i } };
            await sleep(20, ctx.signal);
          }
        } finally {
          handlerFinished = true;
        }
      },
    });
    const phases: number[] = [];
    for await (const update of harness.client.watchRun({ runId: "r-2" })) {
      expect(update.run?.id).toBe("r-2");
      phases.push(update.run!.currentPhase);
      if (phases.length === 3) break;
    }
    expect(phases).toEqual([0, 1, 2]);
    await eventually(() => signal?.aborted === true && handlerFinished);
    expect(producedAfterCancel).toBeLessThanOrEqual(1);
  });

  it("ends a stream when the handler returns, and cancels it through an AbortSignal", async () => {
    harness = await serve(RunService, {
      async *watchRun(request) {
        for (const status of [RunStatus.PENDING, RunStatus.RUNNING, RunStatus.SUCCEEDED]) {
          yield { run: run(request.runId, status) };
        }
      },
    });
    const statuses: RunStatus[] = [];
    for await (const update of harness.client.watchRun({ runId: "r-3" })) statuses.push(update.run!.status);
    expect(statuses).toEqual([RunStatus.PENDING, RunStatus.RUNNING, RunStatus.SUCCEEDED]);

    const controller = new AbortController();
    controller.abort();
    const iterate = async () => {
      for await (const _ of harness!.client.watchRun({ runId: "r-3" }, { signal: controller.signal })) {
        // never reached
      }
    };
    expect((await rejection(iterate())).code).toBe(Code.CANCELLED);
  });

  it("carries an RpcError's code, message and details across the wire", async () => {
    harness = await serve(RunService, {
      async startRun(request) {
        throw new RpcError(Code.ALREADY_EXISTS, `a run for ${request.sourceAccount} is already active`, {
          runId: "r-9",
          note: "déjà vu ✓",
        });
      },
    });
    const err = await rejection(
      harness.client.startRun({ tenantId: "t1", source: "crm", sourceAccount: "acme" }),
    );
    expect(err).toBeInstanceOf(RpcError);
    expect(err.code).toBe(Code.ALREADY_EXISTS);
    expect(err.message).toBe("a run for acme is already active");
    expect(err.details).toEqual({ runId: "r-9", note: "déjà vu ✓" });
  });

  it("tells an UNAVAILABLE the server answered from one no server answered", async () => {
    harness = await serve(RunService, {
      async verifyRun() {
        throw new RpcError(Code.UNAVAILABLE, "the source did not answer");
      },
    });
    const answered = await rejection(harness.client.verifyRun({ runId: "r-1" }));
    expect([answered.code, answered.answered]).toEqual([Code.UNAVAILABLE, true]);
    const address = harness.address;
    await harness.close();
    harness = undefined;
    const nobody = createClient(RunService, address);
    try {
      const unreachable = await rejection(nobody.verifyRun({ runId: "r-1" }));
      expect([unreachable.code, unreachable.answered]).toEqual([Code.UNAVAILABLE, false]);
    } finally {
      nobody.close();
    }
  });

  it("carries an RpcError thrown mid-stream", async () => {
    harness = await serve(RunService, {
      async *watchRun(request) {
        yield { run: run(request.runId) };
        throw new RpcError(Code.NOT_FOUND, "run vanished");
      },
    });
    const received: string[] = [];
    const iterate = async () => {
      for await (const update of harness!.client.watchRun({ runId: "r-4" })) received.push(update.run!.id);
    };
    const err = await rejection(iterate());
    expect(received).toEqual(["r-4"]);
    expect(err.code).toBe(Code.NOT_FOUND);
    expect(err.message).toBe("run vanished");
  });

  it("turns an unknown error into INTERNAL without leaking it, and reports it to the service", async () => {
    const unexpected: unknown[] = [];
    harness = await serve(
      RunService,
      {
        async getRun() {
          throw new Error("password=hunter2 at db.internal:5432");
        },
        async *watchRun() {
          yield* [];
          throw new TypeError("secret stream failure");
        },
      },
      { server: { onUnexpectedError: (err) => unexpected.push(err) } },
    );
    const err = await rejection(harness.client.getRun({ runId: "r-5" }));
    expect(err.code).toBe(Code.INTERNAL);
    expect(err.message).toBe("internal error");
    expect(JSON.stringify(err)).not.toContain("hunter2");

    const iterate = async () => {
      for await (const _ of harness!.client.watchRun({ runId: "r-5" })) {
        // the stream fails before its first message
      }
    };
    const streamErr = await rejection(iterate());
    expect(streamErr.code).toBe(Code.INTERNAL);
    expect(streamErr.message).toBe("internal error");
    expect(unexpected.map((e) => (e as Error).message)).toEqual([
      "password=hunter2 at db.internal:5432",
      "secret stream failure",
    ]);
  });

  it("answers UNAVAILABLE 'waiting for the database' while the database cannot be reached, without the driver's words", async () => {
    harness = await serve(RunService, {
      async getRun() {
        // What postgres.js throws while the server restarts: refused, then "starting up" (57P03).
        throw Object.assign(new Error("connect ECONNREFUSED 10.0.0.7:5432"), { code: "ECONNREFUSED" });
      },
      async listRuns() {
        throw Object.assign(new Error("the database system is starting up"), { code: "57P03" });
      },
    });
    for (const call of [harness.client.getRun({ runId: "r-6" }), harness.client.listRuns({})]) {
      const err = await rejection(call);
      expect(err.code).toBe(Code.UNAVAILABLE);
      expect(err.message).toMatch(/^waiting for the database/);
      expect(err.message).not.toContain("10.0.0.7");
    }
  });

  it("answers a malformed request body with INVALID_ARGUMENT", async () => {
    let called = false;
    harness = await serve(RunService, {
      async getRun() {
        called = true;
        return {};
      },
    });
    const raw = new RawClient(harness.address, credentials.createInsecure());
    try {
      const passthrough = (bytes: Buffer) => bytes;
      // Field 1, length-delimited, claims 100 bytes but carries 3.
      const garbage = Buffer.from([0x0a, 0x64, 0x61, 0x62, 0x63]);
      const err = await new Promise<ServiceError | null>((resolve) => {
        raw.makeUnaryRequest(
          methodPath(RunService.method.getRun),
          passthrough,
          passthrough,
          garbage,
          new Metadata(),
          {},
          (e) => resolve(e),
        );
      });
      expect(err?.code).toBe(Code.INVALID_ARGUMENT);
      expect(err?.details).toContain("drover.v1.GetRunRequest");
      expect(called).toBe(false);
    } finally {
      raw.close();
    }
  });

  it("gives the interceptor the decoded request on demand and a unary call's response from next", async () => {
    const seen: unknown[] = [];
    harness = await serve(
      RunService,
      {
        async stopRun(request) {
          return { run: run(request.runId, RunStatus.STOPPING) };
        },
      },
      {
        server: {
          async interceptor(ctx, next, request) {
            const response = await next();
            seen.push({ method: ctx.method, request: request(), response });
            return response;
          },
        },
      },
    );
    await harness.client.stopRun({ runId: "r-7" });
    expect(seen).toEqual([
      {
        method: "drover.v1.RunService/StopRun",
        request: expect.objectContaining({ runId: "r-7" }),
        response: expect.objectContaining({
          run: expect.objectContaining({ id: "r-7", status: RunStatus.STOPPING }),
        }),
      },
    ]);
  });

  it("answers a malformed body INVALID_ARGUMENT from the interceptor's request() too, without decoding it first", async () => {
    const asked: string[] = [];
    harness = await serve(
      RunService,
      {
        async getRun() {
          return {};
        },
      },
      {
        server: {
          async interceptor(_ctx, next, request) {
            // An interceptor that refuses first never has the request decoded.
            asked.push("before");
            try {
              return await next();
            } catch (err) {
              try {
                request();
              } catch (again) {
                asked.push((again as RpcError).code === Code.INVALID_ARGUMENT ? "malformed" : "other");
              }
              throw err;
            }
          },
        },
      },
    );
    const raw = new RawClient(harness.address, credentials.createInsecure());
    try {
      const passthrough = (bytes: Buffer) => bytes;
      const garbage = Buffer.from([0x0a, 0x64, 0x61, 0x62, 0x63]);
      const err = await new Promise<ServiceError | null>((resolve) => {
        raw.makeUnaryRequest(
          methodPath(RunService.method.getRun),
          passthrough,
          passthrough,
          garbage,
          new Metadata(),
          {},
          (e) => resolve(e),
        );
      });
      expect(err?.code).toBe(Code.INVALID_ARGUMENT);
      expect(asked).toEqual(["before", "malformed"]);
    } finally {
      raw.close();
    }
  });

  it("lets the interceptor see the metadata set by the client's hook, around every call", async () => {
    const seen: { method: string; traceparent: string | undefined; tenant: string | undefined }[] = [];
    const finished: string[] = [];
    let counter = 0;
    harness = await serve(
      RunService,
      {
        async getRun(request) {
          return { run: run(request.runId) };
        },
        async *watchRun(request) {
          yield { run: run(request.runId) };
          yield { run: run(request.runId) };
        },
      },
      {
        server: {
          async interceptor(ctx, next) {
            seen.push({
              method: ctx.method,
              traceparent: ctx.metadata.traceparent,
              tenant: ctx.metadata["x-tenant"],
            });
            try {
              return await next();
            } finally {
              finished.push(ctx.method);
            }
          },
        },
        client: {
          metadata: () => ({ traceparent: `00-${String(++counter).padStart(32, "0")}-00f067aa0ba902b7-01` }),
        },
      },
    );
    await harness.client.getRun({ runId: "r-6" }, { metadata: { "x-tenant": "t1" } });
    let messages = 0;
    for await (const _ of harness.client.watchRun({ runId: "r-6" })) messages++;
    expect(messages).toBe(2);
    expect(seen).toEqual([
      {
        method: "drover.v1.RunService/GetRun",
        traceparent: `00-${"1".padStart(32, "0")}-00f067aa0ba902b7-01`,
        tenant: "t1",
      },
      {
        method: "drover.v1.RunService/WatchRun",
        traceparent: `00-${"2".padStart(32, "0")}-00f067aa0ba902b7-01`,
        tenant: undefined,
      },
    ]);
    await eventually(() => finished.length === 2);
  });

  it("answers UNIMPLEMENTED for a method the implementation omits", async () => {
    harness = await serve(RunService, {});
    const err = await rejection(harness.client.verifyRun({ runId: "r-7" }));
    expect(err.code).toBe(Code.UNIMPLEMENTED);
    expect(err.message).toBe("RunService.VerifyRun is not implemented yet");

    const iterate = async () => {
      for await (const _ of harness!.client.watchRun({ runId: "r-7" })) {
        // nothing is ever sent
      }
    };
    expect((await rejection(iterate())).message).toBe("RunService.WatchRun is not implemented yet");
  });

  it("aborts the handler's signal when the client's deadline passes", async () => {
    let signal: AbortSignal | undefined;
    harness = await serve(RunService, {
      async getRun(_request, ctx) {
        signal = ctx.signal;
        await sleep(5000, ctx.signal);
        return {};
      },
    });
    const err = await rejection(
      harness.client.getRun({ runId: "r-8" }, { deadline: new Date(Date.now() + 100) }),
    );
    expect(err.code).toBe(Code.DEADLINE_EXCEEDED);
    await eventually(() => signal?.aborted === true);
  });

  it("cancels a unary call through an AbortSignal", async () => {
    harness = await serve(RunService, {
      async getRun(_request, ctx) {
        await sleep(5000, ctx.signal);
        return {};
      },
    });
    const controller = new AbortController();
    const pending = harness.client.getRun({ runId: "r-10" }, { signal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    expect((await rejection(pending)).code).toBe(Code.CANCELLED);
  });
});
