import { randomUUID } from "node:crypto";
import { generateSecretKey, parseSecretKeys, SecretKeyring } from "@drover/auth";
import { openDatabase } from "@drover/db";
import { type Provider, RateLimitedError, TransientError } from "@drover/provider-sdk";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  claimVerification,
  dueVerifications,
  requestAutomaticVerifications,
  requestVerificationNow,
  runVerification,
  sourceSecretContext,
  storeVerification,
  VERIFICATION_MAX_ATTEMPTS,
  verificationRequestState,
} from "../src/index.js";
import { type Harness, insertRun, openHarness, testProvider } from "./helpers.js";

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h?.close();
});

const OK = { ok: true, verifiedAt: new Date(), kinds: [] };
const noControls = () => ({ shutdown: new AbortController().signal, working: () => {} });

async function finishedRun(overrides: Parameters<typeof insertRun>[1] = {}) {
  return insertRun(h.db, { status: "succeeded", finishedAt: new Date(), ...overrides });
}

async function verificationOf(runId: string): Promise<Record<string, unknown> | null> {
  const [row] = await h.db.execute<{ verification: Record<string, unknown> | null }>(
    sql`select verification from drover.runs where id = ${runId}::uuid`,
  );
  return row!.verification;
}

describe("verification requests", () => {
  it("two workers racing to claim one request: exactly one wins, every time", async () => {
    const a = openDatabase(h.testDb.url, { max: 2 });
    const b = openDatabase(h.testDb.url, { max: 2 });
    try {
      for (let i = 0; i < 20; i++) {
        const run = await finishedRun();
        await requestVerificationNow(h.db, run.id, 10);
        const claims = await Promise.all([
          claimVerification(a.db, run.id, "worker-a"),
          claimVerification(b.db, run.id, "worker-b"),
        ]);
        expect(claims.filter(Boolean)).toHaveLength(1);
      }
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("a result lands only through the claim that holds the request: a worker given up on stores nothing", async () => {
    const run = await finishedRun();
    await requestVerificationNow(h.db, run.id, 10);
    const first = (await claimVerification(h.db, run.id, "slow"))!;
    // The slow worker stops beating; another takes the request over once it is stale.
    expect(await claimVerification(h.db, run.id, "other")).toBeUndefined();
    await h.db.execute(sql`
      update drover.verification_requests set heartbeat_at = now() - interval '5 minutes'
       where run_id = ${run.id}::uuid`);
    const second = (await claimVerification(h.db, run.id, "other"))!;
    expect(second.token).not.toBe(first.token);
    expect(await storeVerification(h.db, first, { ...OK, error: "stale" })).toBe(false);
    expect(await verificationOf(run.id)).toBeNull();
    expect(await storeVerification(h.db, second, OK)).toBe(true);
    expect(await verificationOf(run.id)).toMatchObject({ ok: true });
  });

  it("a run retried while it was verified gets no result for its old finish, and is asked for again when it ends", async () => {
    const run = await finishedRun({ status: "failed" });
    expect(await requestAutomaticVerifications(h.db, { sampleSize: 5, withinMs: 3_600_000 })).toBeGreaterThan(
      0,
    );
    const claim = (await claimVerification(h.db, run.id, "w"))!;
    // RetryRun re-arms the run; it later finishes again, a little later.
    await h.db.execute(sql`
      update drover.runs set status = 'succeeded', finished_at = now() + interval '1 second', verification = null
       where id = ${run.id}::uuid`);
    await storeVerification(h.db, claim, OK);
    expect(await verificationOf(run.id)).toBeNull();
    // The next pass asks again for the new finish, and only once.
    await requestAutomaticVerifications(h.db, { sampleSize: 5, withinMs: 3_600_000 });
    expect(await verificationRequestState(h.db, run.id)).toMatchObject({ status: "pending", generation: 2 });
    await requestAutomaticVerifications(h.db, { sampleSize: 5, withinMs: 3_600_000 });
    expect(await verificationRequestState(h.db, run.id)).toMatchObject({ generation: 2 });
  });

  it("VerifyRun during a running verification shares it instead of starting another", async () => {
    const run = await finishedRun();
    const asked = (await requestVerificationNow(h.db, run.id, 10))!;
    await claimVerification(h.db, run.id, "w");
    expect(await requestVerificationNow(h.db, run.id, 10)).toMatchObject({ generation: asked.generation });
    expect(await requestVerificationNow(h.db, randomUUID(), 10)).toBeUndefined();
  });

  it("due requests are published once, and again only when a claim goes stale", async () => {
    const run = await finishedRun();
    await requestAutomaticVerifications(h.db, { sampleSize: 5, withinMs: 3_600_000 });
    const due = await dueVerifications(h.db);
    expect(due).toContain(run.id);
    expect(await dueVerifications(h.db)).not.toContain(run.id);
    await claimVerification(h.db, run.id, "w");
    await h.db.execute(sql`
      update drover.verification_requests
         set heartbeat_at = now() - interval '5 minutes', published_at = now() - interval '5 minutes'
       where run_id = ${run.id}::uuid`);
    expect(await dueVerifications(h.db)).toContain(run.id);
  });
});

describe("runVerification on a worker", () => {
  const keyring = new SecretKeyring(parseSecretKeys(generateSecretKey("k1")));
  const TOKEN = `tok-verify-${randomUUID()}`;

  async function sealedRun() {
    const id = randomUUID();
    const sealed = keyring.seal(TOKEN, sourceSecretContext(id));
    return finishedRun({ id, sourceSecretCiphertext: sealed.ciphertext, sourceSecretKeyId: sealed.keyId });
  }

  function provider(sourceIds: (secret: string | undefined) => Promise<string[]>): Provider {
    return {
      ...testProvider(() => []),
      phases: [["companies"]],
      verifier: {
        sourceIds: (ctx) => sourceIds(ctx.run.secret),
        compareSample: async () => [],
      },
    };
  }

  const deps = (p: Provider) => ({
    db: h.db,
    providers: new Map([["test", p]]),
    workerId: "w1",
    maxAttempts: 3,
    notesCap: 10,
    secrets: keyring,
  });

  it("opens the source credential on the worker and stores the result on the run", async () => {
    const run = await sealedRun();
    await requestVerificationNow(h.db, run.id, 10);
    let seen: string | undefined;
    const outcome = await runVerification(
      deps(
        provider(async (secret) => {
          seen = secret;
          return [];
        }),
      ),
      run.id,
      noControls(),
    );
    expect(outcome).toMatchObject({ status: "verified", ok: true });
    expect(seen).toBe(TOKEN);
    expect(await verificationOf(run.id)).toMatchObject({ ok: true, kinds: [{ kind: "companies" }] });
    expect(await verificationRequestState(h.db, run.id)).toMatchObject({ status: "done" });
  });

  it("a transient failure is deferred with backoff, then stored as the error after the last attempt", async () => {
    const run = await sealedRun();
    await requestVerificationNow(h.db, run.id, 10);
    const failing = provider(async () => {
      throw new TransientError("the source answered 503");
    });
    for (let attempt = 1; attempt < VERIFICATION_MAX_ATTEMPTS; attempt++) {
      const outcome = await runVerification(deps(failing), run.id, noControls());
      expect(outcome).toMatchObject({ status: "deferred", attempt });
      expect(await verificationRequestState(h.db, run.id)).toMatchObject({
        status: "pending",
        lastError: expect.stringContaining("503"),
      });
      // Not due yet: a duplicate message is dropped.
      expect((await runVerification(deps(failing), run.id, noControls())).status).toBe("dropped");
      await h.db.execute(
        sql`update drover.verification_requests set not_before = now() where run_id = ${run.id}::uuid`,
      );
    }
    const last = await runVerification(deps(failing), run.id, noControls());
    expect(last).toMatchObject({ status: "verified", ok: false });
    expect(await verificationOf(run.id)).toMatchObject({ ok: false, error: expect.stringContaining("503") });
  });

  it("a rate-limited verification parks until the wall the refusal states, without counting the attempt", async () => {
    const run = await sealedRun();
    await requestVerificationNow(h.db, run.id, 10);
    const wall = new Date(Date.now() + 3_600_000);
    const limited = provider(async () => {
      throw new RateLimitedError("the daily budget is spent", wall);
    });
    for (let i = 0; i < VERIFICATION_MAX_ATTEMPTS + 1; i++) {
      const outcome = await runVerification(deps(limited), run.id, noControls());
      expect(outcome).toMatchObject({ status: "parked", error: expect.stringContaining("daily budget") });
      const state = await verificationRequestState(h.db, run.id);
      expect(state).toMatchObject({ status: "pending", attempts: 0 });
      expect(Math.abs(state!.notBefore.getTime() - wall.getTime())).toBeLessThan(1_000);
      // Not due before the wall: a duplicate message is dropped.
      expect((await runVerification(deps(limited), run.id, noControls())).status).toBe("dropped");
      await h.db.execute(
        sql`update drover.verification_requests set not_before = now() where run_id = ${run.id}::uuid`,
      );
    }
    // More walls than attempts allowed, and still nothing stored: waiting is not failing.
    expect(await verificationOf(run.id)).toBeNull();
    const ok = await runVerification(deps(provider(async () => [])), run.id, noControls());
    expect(ok).toMatchObject({ status: "verified", ok: true });
  });

  it("a worker shutting down hands the request back without counting the attempt", async () => {
    const run = await sealedRun();
    await requestVerificationNow(h.db, run.id, 10);
    const shutdown = new AbortController();
    let verifying!: () => void;
    const providerCalled = new Promise<void>((resolve) => {
      verifying = resolve;
    });
    const outcome = runVerification(
      deps(
        provider(
          () =>
            new Promise((_resolve, reject) => {
              verifying();
              shutdown.signal.addEventListener("abort", () => reject(new Error("aborted")));
            }),
        ),
      ),
      run.id,
      { shutdown: shutdown.signal, working: () => {} },
    );
    // Shut down while the request is claimed and the source is being read, not before the claim.
    await providerCalled;
    shutdown.abort(new Error("worker shutting down"));
    expect(await outcome).toMatchObject({ status: "handed_back" });
    expect(await verificationRequestState(h.db, run.id)).toMatchObject({ status: "pending", attempts: 0 });
  });
});
