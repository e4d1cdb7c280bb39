import { randomUUID } from "node:crypto";
import { generateSecretKey, parseSecretKeys, SecretKeyring } from "@drover/auth";
import { tasks } from "@drover/db";
import { PermanentError, type TaskContext } from "@drover/provider-sdk";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runAssignment, sourceSecretContext, toRunInfo } from "../src/index.js";
import { type Harness, insertRun, insertTask, openHarness, testProvider } from "./helpers.js";

const SECRET = `tok-engine-${randomUUID()}`;
const keyring = new SecretKeyring(parseSecretKeys(generateSecretKey("k1")));

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h?.close();
});

/** A run whose secret is sealed under `ring`, one pending task, and a provider doing `runTask`. */
async function scenario(
  ring: SecretKeyring,
  runTask: (ctx: TaskContext) => Promise<never | object>,
  tamper = false,
) {
  const id = randomUUID();
  const sealed = ring.seal(SECRET, sourceSecretContext(id));
  const ciphertext = tamper
    ? sealed.ciphertext.replace(/^(.{10})(.)/, (_m, p: string, c: string) => `${p}${c === "A" ? "B" : "A"}`)
    : sealed.ciphertext;
  const run = await insertRun(h.db, {
    id,
    sourceSecretCiphertext: ciphertext,
    sourceSecretKeyId: sealed.keyId,
  });
  const task = await insertTask(h.db, run.id);
  const provider = { ...testProvider(() => []), runTask: runTask as never };
  const outcome = await runAssignment(
    {
      db: h.db,
      providers: new Map([["test", provider]]),
      workerId: "w",
      maxAttempts: 3,
      notesCap: 100,
      secrets: keyring,
    },
    task.id,
    { shutdown: new AbortController().signal, working: () => {} },
  );
  const [row] = await h.db.select().from(tasks).where(eq(tasks.id, task.id));
  return { run, outcome, row: row! };
}

describe("the source secret in the task runner", () => {
  it("is opened for the provider, and nowhere else: toRunInfo never carries it", async () => {
    let seen: string | undefined;
    const { run, outcome } = await scenario(keyring, async (ctx) => {
      seen = ctx.run.secret;
      return {};
    });
    expect(outcome.status).toBe("succeeded");
    expect(seen).toBe(SECRET);
    expect(toRunInfo(run).secret).toBeUndefined();
  });

  it("is scrubbed from an error that quotes it before the error is stored or returned", async () => {
    const { outcome, row } = await scenario(keyring, async (ctx) => {
      throw new PermanentError(
        `/v1/persons: the source answered 401: {"error":"bad token ${ctx.run.secret}"}`,
        {
          cause: new Error(`token=${ctx.run.secret}`),
        },
      );
    });
    expect(outcome.status).toBe("failed");
    const error = outcome.status === "failed" ? outcome.error : "";
    expect(error).toContain("bad token [redacted]");
    expect(error).not.toContain(SECRET);
    expect(JSON.stringify(row)).not.toContain(SECRET);
  });

  it("under a key this worker lacks is a transient failure naming the key; tampered, the task fails", async () => {
    const other = new SecretKeyring(parseSecretKeys(generateSecretKey("elsewhere")));
    const missing = await scenario(other, async () => ({}));
    expect(missing.outcome.status).toBe("released");
    expect(missing.row.lastError).toMatch(/key "elsewhere".*not configured here/);

    const tampered = await scenario(keyring, async () => ({}), true);
    expect(tampered.outcome.status).toBe("failed");
    expect(tampered.row.lastError).toMatch(/does not authenticate/);
  });
});
