import { type Dashboard, loadDashboardConfig, startDashboard } from "@drover/dashboard";
import { Code, LIVE_RUN_STATUSES, RUN_STATUSES, RunStatus } from "@drover/proto";
import { createLogger, metrics } from "@drover/telemetry";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, startCluster, until, untilFinished } from "../support/in-process.js";

/**
 * The dashboard's API against a live coordinator: it keeps no credential, forwards the operator's
 * key on every call, and so a tenant key sees and steers its own tenant's runs only.
 */
let c: Cluster;
let dashboard: Dashboard;

beforeAll(async () => {
  c = await startCluster({ apiKeys: { acme: "tenant:acme", globex: "tenant:globex" } });
  dashboard = await startDashboard(
    loadDashboardConfig({
      DROVER_DASHBOARD_ADDRESS: "127.0.0.1:0",
      DROVER_COORDINATOR_ADDRESS: c.coordinator.address,
      DROVER_METRICS_PORT: "off",
      DROVER_SHUTDOWN_GRACE_MS: "1000",
    }),
    { logger: createLogger("dashboard", { level: "silent" }) },
  );
});
afterAll(async () => {
  await dashboard?.stop();
  await c?.close();
});

async function call(method: string, path: string, token?: string) {
  const res = await fetch(new URL(path, dashboard.url), {
    method,
    headers: token ? { authorization: `Bearer ${token}` } : {},
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
}

interface Event {
  event: string;
  data: Record<string, unknown>;
}

/** Reads the run's Server-Sent Events until the stream ends. */
async function events(runId: string, token: string): Promise<Event[]> {
  const res = await fetch(new URL(`/api/runs/${runId}/events`, dashboard.url), {
    headers: { authorization: `Bearer ${token}` },
  });
  expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
  const text = await res.text();
  return text
    .split("\n\n")
    .filter(Boolean)
    .map((chunk) => {
      const lines = chunk.split("\n");
      return {
        event: lines.find((l) => l.startsWith("event: "))!.slice(7),
        data: JSON.parse(lines.find((l) => l.startsWith("data: "))!.slice(6)),
      };
    });
}

describe("dashboard API", { timeout: 120_000 }, () => {
  it("forwards the operator's key: a tenant key lists its own runs only, and another tenant's run is not found", async () => {
    const acmeRun = await c.start("acme", ["organizations"]);
    const globexRun = await c.start("globex", ["organizations"]);

    const asAcme = await call("GET", "/api/runs", c.tokens.acme);
    expect(asAcme.status).toBe(200);
    const ids = (asAcme.body.runs as { id: string }[]).map((r) => r.id);
    expect(ids).toContain(acmeRun.id);
    expect(ids).not.toContain(globexRun.id);
    const asAdmin = await call("GET", "/api/runs", c.tokens.admin);
    expect((asAdmin.body.runs as { id: string }[]).map((r) => r.id)).toEqual(
      expect.arrayContaining([acmeRun.id, globexRun.id]),
    );

    const probe = await call("GET", `/api/runs/${globexRun.id}`, c.tokens.acme);
    expect(probe.status).toBe(404);
    expect(probe.body.error).toMatch(/^Run .* (does not exist|not found)/i);
    // The live stream too: refused as plain HTTP before any event, so the page can say why.
    const stream = await fetch(new URL(`/api/runs/${globexRun.id}/events`, dashboard.url), {
      headers: { authorization: `Bearer ${c.tokens.acme}` },
    });
    expect(stream.status).toBe(404);
    expect(stream.headers.get("content-type")).toMatch(/^application\/json/);
    const steer = await call("POST", `/api/runs/${globexRun.id}/stop`, c.tokens.acme);
    expect(steer.status).toBe(404);
    const { run: still } = await c.client.getRun({ runId: globexRun.id });
    expect([RunStatus.PENDING, RunStatus.RUNNING]).toContain(still!.status);

    expect(await call("GET", "/api/runs")).toMatchObject({
      status: 401,
      body: { error: "Enter an API key: every call to the coordinator needs one." },
    });
    expect(await call("GET", "/api/runs", "drv_unknown")).toMatchObject({
      status: 401,
      body: { error: "The coordinator does not accept this API key. Enter a valid key." },
    });
    // A worker key may not use RunService at all.
    expect((await call("GET", "/api/runs", c.tokens.worker)).status).toBe(403);

    for (const r of [acmeRun, globexRun]) await c.client.stopRun({ runId: r.id });
  });

  it("steers a run, and a refusal comes back as a sentence", async () => {
    const run = await c.start("steer-tenant", ["organizations"]);
    const stopped = await call("POST", `/api/runs/${run.id}/stop`, c.tokens.admin);
    expect(stopped.status).toBe(200);
    expect(["stopping", "stopped"]).toContain((stopped.body.run as { status: string }).status);
    await untilFinished(c, run.id);

    const retry = await call("POST", `/api/runs/${run.id}/retry`, c.tokens.admin);
    expect(retry.status).toBe(409);
    expect(retry.body.error).toMatch(/^[A-Z].*\.$/);
    expect(retry.body.error).toContain(run.id);
    // "Retry these" on a reason group: the filter reaches the coordinator, whose refusals say why.
    const notAKind = await call("POST", `/api/runs/${run.id}/retry?kind=widgets&reason=x`, c.tokens.admin);
    expect(notAKind.status).toBe(400);
    expect(notAKind.body.error).toContain('kind "widgets" is not a kind of run');
    const redrive = await call(
      "POST",
      `/api/runs/${run.id}/retry?kind=organizations&reason=${encodeURIComponent("name is missing")}`,
      c.tokens.admin,
    );
    expect(redrive.status).toBe(409);
    expect(redrive.body.error).toContain("only a finished run (succeeded or failed) can be re-driven");

    const resumed = await call("POST", `/api/runs/${run.id}/resume`, c.tokens.admin);
    expect(resumed.status).toBe(200);
    expect((resumed.body.run as { can: { stop: boolean } }).can.stop).toBe(true);
    await c.client.stopRun({ runId: run.id });

    // The run page's history: each of those calls, newest first, refused ones with their reason.
    const history = await call("GET", `/api/runs/${run.id}/history`, c.tokens.admin);
    expect(history.status).toBe(200);
    const events = history.body.events as { who: string; action: string; outcome: string; message: string }[];
    expect(events.map((e) => [e.action, e.outcome])).toEqual([
      ["StopRun", "ok"],
      ["ResumeRun", "ok"],
      ["RetryRun", "FAILED_PRECONDITION"],
      ["RetryRun", "INVALID_ARGUMENT"],
      ["RetryRun", "FAILED_PRECONDITION"],
      ["StopRun", "ok"],
      ["StartRun", "ok"],
    ]);
    expect(events.every((e) => e.who === "admin-key")).toBe(true);
    expect(events[2]!.message).toContain("only a finished run (succeeded or failed) can be re-driven");
    // Another tenant's key: a filter on events it may not see, so nothing (as for a run that never was).
    const probe = await call("GET", `/api/runs/${run.id}/history`, c.tokens.acme);
    expect(probe.status).toBe(200);
    expect(probe.body.events).toEqual([]);
  });

  it("streams a run live over Server-Sent Events until it ends, with its reasons", async () => {
    await c.addWorker();
    const run = await c.start("live-tenant", ["organizations", "persons"]);
    const stream = await events(run.id, c.tokens.admin!);
    const runs = stream.filter((e) => e.event === "run").map((e) => e.data);
    expect(runs.length).toBeGreaterThan(1);
    expect(runs.at(-1)).toMatchObject({ id: run.id, status: "succeeded" });
    // Rows only grow along the stream.
    const rows = runs.map((r) => r.rows as number);
    expect(rows).toEqual([...rows].sort((a, b) => a - b));
    expect(rows.at(-1)).toBeGreaterThan(0);
    expect(stream.some((e) => e.event === "notes")).toBe(true);
    expect(stream.at(-1)!.event).toBe("end");

    // Its rows over time add up to every row it accounted for.
    const throughput = async (runId: string) => {
      const { body } = await call("GET", `/api/runs/${runId}/throughput`, c.tokens.admin);
      const { run: finished } = await c.client.getRun({ runId });
      const accounted = finished!.progress.reduce(
        (n, p) => n + Number(p.imported + p.matched + p.alreadyHere + p.skipped + p.failed),
        0,
      );
      return { body, accounted, points: body.points as { at: string; rows: number }[] };
    };
    const first = await throughput(run.id);
    expect(first.body.bucketSeconds).toBeGreaterThanOrEqual(1);
    expect(first.points.length).toBeGreaterThan(0);
    expect(first.points.reduce((n, p) => n + p.rows, 0)).toBe(first.accounted);
    expect(Date.parse(first.points[1]?.at ?? first.points[0]!.at) - Date.parse(first.points[0]!.at)).toBe(
      first.points.length > 1 ? (first.body.bucketSeconds as number) * 1000 : 0,
    );

    // The finished run's verification comes after its end, and the run's JSON carries it per kind.
    expect((await call("GET", `/api/runs/${run.id}`, c.tokens.admin)).body.run).toMatchObject({
      verificationPending: expect.any(Boolean),
    });
    const verified = await until(
      async () => {
        const { body: b } = await call("GET", `/api/runs/${run.id}`, c.tokens.admin);
        const r = b.run as {
          verification: { ok: boolean; kinds: { kind: string }[] } | null;
          verificationPending: boolean;
        };
        return r.verification ? r : undefined;
      },
      60_000,
      "the run's verification",
    );
    expect(verified.verificationPending).toBe(false);
    expect(verified.verification!.kinds.map((k) => k.kind)).toEqual(
      expect.arrayContaining(["organizations", "persons"]),
    );

    // A re-run finds its rows already here: they are its throughput too, not only what it missed.
    const again = await c.start("live-tenant", ["organizations", "persons"]);
    await untilFinished(c, again.id);
    const second = await throughput(again.id);
    const { run: rerun } = await c.client.getRun({ runId: again.id });
    expect(rerun!.progress.reduce((n, p) => n + Number(p.alreadyHere), 0)).toBeGreaterThan(0);
    expect(second.points.reduce((n, p) => n + p.rows, 0)).toBe(second.accounted);
  });

  it("ends the coordinator's watch when the page goes away", async () => {
    const run = await c.start("leaving-tenant", ["organizations"]);
    const open = () => metrics.collect().find((m) => m.name === "drover_dashboard_live_streams")!;
    const streams = () => [...open().series.values()][0]?.value ?? 0;
    const page = new AbortController();
    const res = await fetch(new URL(`/api/runs/${run.id}/events`, dashboard.url), {
      headers: { authorization: `Bearer ${c.tokens.admin}` },
      signal: page.signal,
    });
    const reader = res.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toMatch(/^event: run\n/);
    expect(streams()).toBe(1);
    page.abort();
    await until(() => streams() === 0, 10_000, "the live stream to close");
    // Tidy up; a run this small may well have finished by now.
    await c.client.stopRun({ runId: run.id }).catch((err: { code?: number }) => {
      if (err.code !== Code.FAILED_PRECONDITION) throw err;
    });
  });

  it("serves the page under a policy that refuses inline and foreign scripts", async () => {
    const res = await fetch(dashboard.url);
    expect(res.status).toBe(200);
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain("unsafe-inline");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    const html = await res.text();
    expect(html).toContain('<script type="module" src="/app.js"></script>');
    expect(html).not.toMatch(/<script>/);
    expect((await fetch(new URL("/nope", dashboard.url))).status).toBe(404);
  });

  it("gives the page its status words from the one definition every layer reads, before app.js", async () => {
    const html = await (await fetch(dashboard.url)).text();
    expect(html.indexOf('<script src="/vocabulary.js" defer></script>')).toBeGreaterThan(-1);
    // A deferred classic script and a module script run in document order: the vocabulary first.
    expect(html.indexOf("/vocabulary.js")).toBeLessThan(html.indexOf("/app.js"));
    const script = await (await fetch(new URL("/vocabulary.js", dashboard.url))).text();
    const window: { DROVER_VOCABULARY?: { runStatuses: string[]; liveRunStatuses: string[] } } = {};
    new Function("window", script)(window);
    expect(window.DROVER_VOCABULARY).toEqual({
      runStatuses: [...RUN_STATUSES],
      liveRunStatuses: [...LIVE_RUN_STATUSES],
    });
    // No module of the page keeps a list of its own to drift from it.
    const modules = await pageModules();
    expect(modules.size).toBeGreaterThan(1);
    for (const [path, source] of modules) expect(source, path).not.toMatch(/"pending",\s*"running"/);
  });

  it("serves every module app.js imports, as JavaScript from this origin", async () => {
    // Under nosniff a module script that does not come as JavaScript is refused, and the page is blank.
    for (const path of (await pageModules()).keys()) {
      const res = await fetch(new URL(path, dashboard.url));
      expect(res.status, path).toBe(200);
      expect(res.headers.get("content-type"), path).toBe("text/javascript; charset=utf-8");
      expect(res.headers.get("content-security-policy"), path).toContain("script-src 'self'");
    }
  });
});

/** The page's modules, from /app.js along its imports (all relative, of this origin): path to source. */
async function pageModules(): Promise<Map<string, string>> {
  const modules = new Map<string, string>();
  const pending = ["/app.js"];
  for (let path = pending.pop(); path; path = pending.pop()) {
    if (modules.has(path)) continue;
    const res = await fetch(new URL(path, dashboard.url));
    expect(res.status, path).toBe(200);
    const source = await res.text();
    modules.set(path, source);
    for (const [, spec] of source.matchAll(/^import [^;]*? from "(\.\/[^"]+)";$/gms))
      pending.push(new URL(spec!, new URL(path, "http://page")).pathname);
  }
  return modules;
}
