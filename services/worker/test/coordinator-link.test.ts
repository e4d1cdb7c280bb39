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

describe("the worker's line to the coordinators", () => {
  it("moves to the address the leader announced once its own coordinator is gone", async () => {
    await database.db
      .insert(leadership)
      .values({ name: COORDINATOR_LEADERSHIP, holder: "c2", address: "leader:50051" });
    const called: string[] = [];
    // The configured coordinator answers UNAVAILABLE; the leader answers.
    const connect = (address: string) =>
      ({
        taskFinished: async () => {
          called.push(address);
          if (address === "gone:50051") throw new RpcError(Code.UNAVAILABLE, "connection refused");
          return {};
        },
        close: () => {},
      }) as unknown as Client<typeof WorkerService>;
    const link = new CoordinatorLink("gone:50051", database.db, connect);
    const request = { taskId: "1", runId: "r", outcome: "succeeded", phase: 0 };
    await expect(link.taskFinished(request)).rejects.toThrow(/connection refused/);
    await link.taskFinished(request);
    expect(called).toEqual(["gone:50051", "leader:50051"]);
    link.close();
  });

  it("moves to the new leader when the coordinator it uses stops answering (cut off: the call runs out of time)", async () => {
    await database.db
      .insert(leadership)
      .values({ name: COORDINATOR_LEADERSHIP, holder: "c3", address: "new-leader:50051" })
      .onConflictDoUpdate({ target: leadership.name, set: { holder: "c3", address: "new-leader:50051" } });
    const called: string[] = [];
    const connect = (address: string) =>
      ({
        leaseBudget: async () => {
          called.push(address);
          if (address === "cut-off:50051")
            throw new RpcError(Code.DEADLINE_EXCEEDED, "Deadline exceeded after 5.0s");
          return {};
        },
        close: () => {},
      }) as unknown as Client<typeof WorkerService>;
    const link = new CoordinatorLink("cut-off:50051", database.db, connect);
    const request = { workerId: "w", source: "crm", account: "sandbox", calls: 1 } as never;
    await expect(link.leaseBudget(request)).rejects.toThrow(/Deadline exceeded/);
    await link.leaseBudget(request);
    expect(called).toEqual(["cut-off:50051", "new-leader:50051"]);
    link.close();
  });
});
