import {
  type Client,
  CompleteRunResponseSchema,
  create,
  RunSchema,
  type RunService,
  StartRunResponseSchema,
} from "@drover/proto";
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

describe("drover start --base-url", () => {
  it("is not asked of a source without an API address, such as pg-table", async () => {
    const { asked, client } = recordingClient();
    const table = ["--tenant", "acme", "--source", "pg-table", "--account", "src-db", "--setting", "table=t"];
    expect(await runCommand("start", table, client, io, {})).toBe(0);
    expect(asked).toMatchObject([{ source: "pg-table", sourceConfig: { baseUrl: "" } }]);
  });
});

describe("drover start --follow", () => {
  it("asks for a run that follows the source, with its interval", async () => {
    const { asked, client } = recordingClient();
    expect(await runCommand("start", [...start, "--follow", "--follow-interval", "2"], client, io, {})).toBe(
      0,
    );
    expect(asked).toMatchObject([{ follow: true, followIntervalSeconds: 2 }]);
    await runCommand("start", [...start, "--follow"], client, io, {});
    expect(asked[1]).toMatchObject({ follow: true });
    expect(asked[1]).not.toHaveProperty("followIntervalSeconds");
    await runCommand("start", start, client, io, {});
    expect(asked[2]).not.toHaveProperty("follow");
  });

  it("refuses an interval without --follow, or one that is not whole seconds from 1", async () => {
    const { asked, client } = recordingClient();
    const bad = [
      ["--follow-interval", "5"],
      ["--follow", "--follow-interval", "0"],
      ["--follow", "--follow-interval", "1.5"],
    ];
    for (const args of bad)
      await expect(runCommand("start", [...start, ...args], client, io, {})).rejects.toThrow(UsageError);
    expect(asked).toEqual([]);
  });
});

describe("drover complete", () => {
  it("asks the run to cut over", async () => {
    const asked: unknown[] = [];
    const client = {
      completeRun: async (req: unknown) => {
        asked.push(req);
        return create(CompleteRunResponseSchema, { run: create(RunSchema, { id: "r-1" }) });
      },
    } as unknown as Client<typeof RunService>;
    const out: string[] = [];
    expect(await runCommand("complete", ["r-1"], client, { ...io, out: (t) => out.push(t) }, {})).toBe(0);
    expect(asked).toEqual([{ runId: "r-1" }]);
    expect(out.join("")).toMatch(/cutting over/);
  });
});

describe("drover start --dry-run", () => {
  it("asks for a dry run only when told", async () => {
    const { asked, client } = recordingClient();
    expect(await runCommand("start", [...start, "--dry-run"], client, io, {})).toBe(0);
    await runCommand("start", start, client, io, {});
    expect(asked[0]).toMatchObject({ dryRun: true });
    expect(asked[1]).not.toHaveProperty("dryRun");
  });
});
