import { COORDINATOR_LEADERSHIP, leadership, openDatabase } from "@drover/db";
import { createTestDatabase, type TestDatabase } from "@drover/db/testing";
import { type Client, Code, RpcError, type WorkerService } from "@drover/proto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CoordinatorLink } from "../src/coordinator-link.js";

let testDb: TestDatabase;
let database: ReturnType<typeof openDatabase>;

beforeAll(async () => {
  testDb = await createTestDatabase();
  database = openDatabase(testDb.url, { max: 2 });
});
afterAll(async () => {
  await database.close();
  await testDb.drop();
});

/** The leader's announced address, as a coordinator that took the lease writes it. */
async function announce(holder: string, address: string): Promise<void> {
  await database.db
    .insert(leadership)
    .values({ name: COORDINATOR_LEADERSHIP, holder, address })
    .onConflictDoUpdate({ target: leadership.name, set: { holder, address } });
}

/**
 * Coordinators by address: every call is recorded in `called`, and answered, or refused with the
 * error `refuse` gives for that address at that moment.
 */
function coordinators(refuse: (address: string) => RpcError | undefined) {
  const called: string[] = [];
  const answer = (address: string) => async () => {
    called.push(address);
    const err = refuse(address);
    if (err) throw err;
    return {};
  };
  const connect = (address: string) =>
    ({
      taskFinished: answer(address),
      leaseBudget: answer(address),
      close: () => {},
    }) as unknown as Client<typeof WorkerService>;
  return { called, connect };
}

describe("the worker's line to the coordinators", () => {
  it("moves to the address the leader announced once its own coordinator is gone", async () => {
    await announce("c2", "leader:50051");
    // The configured coordinator answers UNAVAILABLE; the leader answers.
    const { called, connect } = coordinators((address) =>
      address === "gone:50051" ? new RpcError(Code.UNAVAILABLE, "connection refused") : undefined,
    );
    const link = new CoordinatorLink("gone:50051", database.db, connect);
    const request = { taskId: "1", runId: "r", outcome: "succeeded", phase: 0 };
    await expect(link.taskFinished(request)).rejects.toThrow(/connection refused/);
    await link.taskFinished(request);
    expect(called).toEqual(["gone:50051", "leader:50051"]);
    link.close();
  });

  it("moves to the new leader when the coordinator it uses stops answering (cut off: the call runs out of time)", async () => {
    await announce("c3", "new-leader:50051");
    const { called, connect } = coordinators((address) =>
      address === "cut-off:50051"
        ? new RpcError(Code.DEADLINE_EXCEEDED, "Deadline exceeded after 5.0s")
        : undefined,
    );
    const link = new CoordinatorLink("cut-off:50051", database.db, connect);
    const request = { workerId: "w", source: "crm", account: "sandbox", calls: 1 } as never;
    await expect(link.leaseBudget(request)).rejects.toThrow(/Deadline exceeded/);
    await link.leaseBudget(request);
    expect(called).toEqual(["cut-off:50051", "new-leader:50051"]);
    link.close();
  });

  it("goes back to the configured coordinator when the leader's announced address cannot be reached from here", async () => {
    // The leader announced its own loopback: from another host that is nobody, or the wrong process.
    await announce("c4", "127.0.0.1:50051");
    let configuredDown = true;
    const { called, connect } = coordinators((address) =>
      address === "127.0.0.1:50051" || configuredDown
        ? new RpcError(Code.UNAVAILABLE, `connect ECONNREFUSED ${address}`)
        : undefined,
    );
    const link = new CoordinatorLink("forwarded:50051", database.db, connect);
    const request = { workerId: "w", source: "crm", account: "sandbox", calls: 1 } as never;
    // Cut off: the configured coordinator does not answer, so the link tries the announced one…
    await expect(link.leaseBudget(request)).rejects.toThrow(/ECONNREFUSED forwarded/);
    configuredDown = false;
    // …which this host cannot reach: it goes back, and the configured one answers again.
    await expect(link.leaseBudget(request)).rejects.toThrow(/ECONNREFUSED 127.0.0.1/);
    await link.leaseBudget(request);
    expect(called).toEqual(["forwarded:50051", "127.0.0.1:50051", "forwarded:50051"]);
    link.close();
  });
});
