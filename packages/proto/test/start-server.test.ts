import { describe, expect, it } from "vitest";
import { addService, createClient, isRpcError, RunService, startServer } from "../src/index.js";
import { eventually, sleep } from "./harness.js";

describe("startServer", () => {
  it("binds a free port and forces an open stream down after the grace time", async () => {
    const running = await startServer({ address: "127.0.0.1:0" });
    expect(running.port).toBeGreaterThan(0);
    let signal: AbortSignal | undefined;
    addService(running.server, RunService, {
      async *watchRun(request, ctx) {
        signal = ctx.signal;
        yield { run: { id: request.runId } };
        await sleep(60_000, ctx.signal);
      },
    });
    const client = createClient(RunService, `127.0.0.1:${running.port}`);
    try {
      const iterator = client.watchRun({ runId: "r-1" })[Symbol.asyncIterator]();
      expect((await iterator.next()).value?.run?.id).toBe("r-1");
      const pendingNext = iterator.next().then(
        () => undefined,
        (err: unknown) => err,
      );

      const started = Date.now();
      await running.shutdown(150);
      const took = Date.now() - started;
      expect(took).toBeGreaterThanOrEqual(100);
      expect(took).toBeLessThan(2000);

      expect(isRpcError(await pendingNext)).toBe(true);
      await eventually(() => signal?.aborted === true);
    } finally {
      client.close();
    }
  });

  it("shuts down at once when no call is open", async () => {
    const running = await startServer({ address: "127.0.0.1:0" });
    const started = Date.now();
    await running.shutdown(5000);
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
