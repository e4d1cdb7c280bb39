import { type Client, create, RetryRunResponseSchema, RunSchema, type RunService } from "@drover/proto";
import { describe, expect, it } from "vitest";
import { type Io, runCommand, UsageError } from "../src/commands.js";

function recordingClient() {
  const asked: Record<string, unknown>[] = [];
  const client = {
    retryRun: async (req: Record<string, unknown>) => {
      asked.push(req);
      return create(RetryRunResponseSchema, { run: create(RunSchema, { id: "r-1" }) });
    },
  } as unknown as Client<typeof RunService>;
  return { asked, client };
}

const io: Io = { out: () => {}, err: () => {}, isTty: false };

describe("drover retry (re-drive)", () => {
  it("sends no filter for a plain retry", async () => {
    const { asked, client } = recordingClient();
    expect(await runCommand("retry", ["r-1"], client, io, {})).toBe(0);
    expect(asked).toEqual([{ runId: "r-1", kind: "", reason: "", sourceIds: [] }]);
  });

  it("sends the kind, the reason and the ids it is given", async () => {
    const { asked, client } = recordingClient();
    const reason = "name must be a string, got number";
    await runCommand(
      "retry",
      ["r-1", "--kind", "persons", "--reason", reason, "--ids", "1, 2,3"],
      client,
      io,
      {},
    );
    expect(asked).toEqual([{ runId: "r-1", kind: "persons", reason, sourceIds: ["1", "2", "3"] }]);
  });

  it("refuses an empty id in --ids before calling the coordinator", async () => {
    const { asked, client } = recordingClient();
    for (const bad of ["", "1,,2", "1,"])
      await expect(runCommand("retry", ["r-1", "--ids", bad], client, io, {})).rejects.toThrow(UsageError);
    expect(asked).toEqual([]);
  });
});
