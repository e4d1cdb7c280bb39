import { type Client, create, RunSchema, type RunService, StartRunResponseSchema } from "@drover/proto";
import { describe, expect, it } from "vitest";
import { type Io, runCommand, UsageError } from "../src/commands.js";

function recordingClient() {
  const asked: Record<string, unknown>[] = [];
  const client = {
    startRun: async (req: Record<string, unknown>) => {
      asked.push(req);
      return create(StartRunResponseSchema, { run: create(RunSchema, { id: "r-1" }) });
    },
  } as unknown as Client<typeof RunService>;
  return { asked, client };
}

const io: Io = { out: () => {}, err: () => {}, isTty: false };
const start = ["--tenant", "acme", "--account", "acme-co", "--base-url", "https://acme.pipedrive.com"];

describe("drover start --daily-share", () => {
  it("asks for the run's share of the account's day", async () => {
    const { asked, client } = recordingClient();
    expect(await runCommand("start", [...start, "--daily-share", "0.5"], client, io, {})).toBe(0);
    expect(asked).toMatchObject([{ dailyShare: 0.5 }]);
    await runCommand("start", start, client, io, {});
    expect(asked[1]).not.toHaveProperty("dailyShare");
  });

  it("refuses a share that is not above 0 and at most 1, saying what to give", async () => {
    const { asked, client } = recordingClient();
    for (const bad of ["0", "1.5", "half"]) {
      await expect(runCommand("start", [...start, "--daily-share", bad], client, io, {})).rejects.toThrow(
        UsageError,
      );
    }
    expect(asked).toEqual([]);
  });
});
