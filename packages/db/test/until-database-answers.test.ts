import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { untilDatabaseAnswers } from "../src/index.js";
import { DEFAULT_DATABASE_URL } from "../src/testing.js";

const base = process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL;

/** A port nothing listens on: what a process sees while its database server restarts. */
async function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

describe("waiting for the database at start", () => {
  it("goes on at once when the server answers", async () => {
    await expect(untilDatabaseAnswers(base)).resolves.toBeUndefined();
  });

  it("waits while nothing answers, says so, and gives up naming what to check", async () => {
    const url = `postgres://postgres@127.0.0.1:${await closedPort()}/drover`;
    const waits: number[] = [];
    const started = Date.now();
    await expect(
      untilDatabaseAnswers(url, { timeoutMs: 1_200, onWait: (_err, waited) => waits.push(waited) }),
    ).rejects.toThrow(/no database server answered at 127\.0\.0\.1:\d+ within 1 s .*is DATABASE_URL right/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_200);
    expect(waits[0]).toBeLessThan(1_000);
  });

  it("does not wait out a failure that waiting cannot mend", async () => {
    const url = new URL(base);
    url.username = "no_such_role_here";
    await expect(untilDatabaseAnswers(url.toString(), { timeoutMs: 60_000 })).rejects.toThrow(
      /no_such_role_here/,
    );
  });
});
