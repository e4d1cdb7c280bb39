import { randomBytes, randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { generateSecretKey, parseSecretKeys, SecretKeyring } from "@drover/auth";
import { runs, tasks } from "@drover/db";
import {
  PermanentError,
  type Provider,
  type SourceAdapter,
  SourceClient,
  type TaskContext,
} from "@drover/provider-sdk";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { progressRun, runAssignment, sourceSecretContext } from "../src/index.js";
import { type Harness, insertRun, insertTask, openHarness, testProvider } from "./helpers.js";

/** Upper case after a Q: no prefix of it occurs in the runner's or the client's own words. */
const TOKEN = `QZ${randomBytes(12).toString("hex").toUpperCase()}`;
/** The least a source needs: how the token travels. */
const adapter: SourceAdapter = {
  authHeaders: (token) => ({ authorization: `Bearer ${token}` }),
  cost: () => 1,
  readBudget: () => ({}),
};
const keyring = new SecretKeyring(parseSecretKeys(generateSecretKey("k1")));

let h: Harness;
let server: Server;
let baseUrl: string;
beforeAll(async () => {
  h = await openHarness();
  // A source that quotes the token it refused, `before` characters into its 401 body.
  server = createServer((req, res) => {
    const before = Number(new URL(req.url ?? "/", "http://x").searchParams.get("before"));
    res.writeHead(401);
    res.end(`${".".repeat(before)}${TOKEN} is not a valid token`);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
  await h?.close();
});

/** Runs one task of a one-phase run to its end, and the run to its end; returns every text of it. */
async function failedRunTexts(runTask: (ctx: TaskContext) => Promise<never>) {
  const id = randomUUID();
  const sealed = keyring.seal(TOKEN, sourceSecretContext(id));
  await insertRun(h.db, {
    id,
    plan: [["companies"]],
    sourceSecretCiphertext: sealed.ciphertext,
    sourceSecretKeyId: sealed.keyId,
  });
  const task = await insertTask(h.db, id);
  const provider: Provider = { ...testProvider(() => []), runTask };
  const providers = new Map([["test", provider]]);
  const outcome = await runAssignment(
    { db: h.db, providers, workerId: "w", maxAttempts: 3, notesCap: 100, secrets: keyring },
    task.id,
    { shutdown: new AbortController().signal, working: () => {} },
  );
  await progressRun({ db: h.db, providers, notesCap: 100 }, id);
  const [t] = await h.db.select().from(tasks).where(eq(tasks.id, task.id));
  const [r] = await h.db.select().from(runs).where(eq(runs.id, id));
  expect(outcome.status).toBe("failed");
  return {
    // What the worker logs as the task's error.
    logged: outcome.status === "failed" ? (outcome.error ?? "") : "",
    lastError: t!.lastError ?? "",
    // What GetRun and ListRuns show.
    runError: r!.error ?? "",
  };
}

describe("a source's token cut by an excerpt", () => {
  it("leaves no prefix in the task's last error, the run's error or the logged error, wherever the source client's 200-character excerpt cuts it", async () => {
    for (const before of [200 - TOKEN.length, 200 - TOKEN.length + 1, 200 - TOKEN.length / 2, 199]) {
      const texts = await failedRunTexts(async (ctx) => {
        const client = new SourceClient({ baseUrl, apiToken: ctx.run.secret ?? "", adapter });
        return client.getJson("/v1/deals", { before }) as never;
      });
      for (const [where, text] of Object.entries(texts)) {
        expect(text, `${where}, token at ${before}`).toMatch(/answered 401/);
        expect(text, `${where}, token at ${before}`).not.toContain(TOKEN.slice(0, 1));
      }
    }
  });

  it("leaves no prefix where the task error's 500-character cut falls inside it", async () => {
    for (const before of [497 - TOKEN.length + 1, 497 - TOKEN.length / 2, 496]) {
      const texts = await failedRunTexts(async (ctx) => {
        throw new PermanentError(`${".".repeat(before)}${ctx.run.secret} refused`);
      });
      for (const [where, text] of Object.entries(texts))
        expect(text, `${where}, token at ${before}`).not.toContain(TOKEN.slice(0, 1));
    }
  });
});
