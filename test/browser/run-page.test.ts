import { existsSync, mkdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "@drover/local-cluster";
import { RunStatus } from "@drover/proto";
import { sql } from "drizzle-orm";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, openClusterHarness, until } from "../support/cluster-harness.js";

/**
 * The run page end to end: real coordinator, worker, sandbox and dashboard processes, Debian's
 * Chromium driven by playwright-core. The page is loaded while a run goes (the sandbox answers
 * slowly enough that it lasts), photographed, and stopped with its Stop button.
 */
const CHROMIUM = "/usr/bin/chromium";
const SCREENSHOT = join(REPO_ROOT, ".artifacts", "screenshots", "run-page.png");
// A source account is free text: the page must show it as text, never run it.
const HOSTILE_ACCOUNT = `acme<img src=x onerror="window.__xss=1">`;

/**
 * What the test reads inside the page (functions passed to evaluate run there; this file is typed
 * for Node, and the page's policy forbids evaluating strings).
 */
interface InPage {
  document: {
    querySelector(
      selector: string,
    ): { getAttribute(name: string): string | null; textContent: string | null } | null;
    querySelectorAll(selector: string): Iterable<{ textContent: string | null }>;
  };
  __xss?: number;
}

let h: Harness;
let browser: Browser;

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)`);
  h = await openClusterHarness({
    workers: 1,
    laneWidth: 2,
    dashboard: true,
    // About a minute of work for one worker, so the run is still going however slowly the page
    // is driven on a loaded machine; the test stops it long before.
    sandbox: {
      organizations: 1000,
      persons: 3000,
      deals: 1500,
      leads: 300,
      activities: 1500,
      notes: 1500,
      "mail-per-deal-max": 2,
      "latency-ms": 100,
      "malformed-rate": 0.03,
    },
  });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
});

afterAll(async () => {
  await browser?.close();
  await h?.close();
});

async function enterKey(page: Page, token: string): Promise<void> {
  await page.goto(h.cluster.dashboardUrl!);
  await page.locator("#api-key").fill(token);
  await page.locator("#use-key").click();
}

describe("the run page in headless Chromium", { timeout: 180_000 }, () => {
  it("shows a live run, with its phase, bars, tasks, budget, throughput and reasons, and stops it", async () => {
    const { run } = await h.client.startRun({
      tenantId: "browser-tenant",
      source: "crm",
      sourceAccount: HOSTILE_ACCOUNT,
      sourceConfig: {
        baseUrl: h.cluster.sandboxUrl,
        apiToken: "browser-token",
        settings: { pageSize: "50" },
      },
    });
    const runId = run!.id;
    const page = await browser.newPage({ viewport: { width: 1280, height: 1400 } });
    const problems: string[] = [];
    page.on("pageerror", (err) => problems.push(err.message));

    await enterKey(page, h.cluster.adminToken);
    // The list of runs, then the run's own page through its link.
    const row = page.locator(`#runs tr[data-run-id="${runId}"]`);
    await row.waitFor({ timeout: 30_000 });
    expect(await row.textContent()).toContain(HOSTILE_ACCOUNT);
    await row.locator("a").click();

    await page.locator("#run-status[data-status=running]").waitFor({ timeout: 30_000 });
    expect(await page.locator("#phase").textContent()).toMatch(/^Phase \d+ of \d+: \w+/);
    expect(await page.locator("#phases li").count()).toBe(run!.phases.length);
    // Live updates: rows arrive, a throughput line is drawn from successive updates.
    await page.locator("#kinds .kind .bar span").first().waitFor({ timeout: 60_000 });
    // A few seconds of throughput, so the chart in the screenshot has a shape.
    await page.waitForFunction(
      () =>
        (
          (globalThis as unknown as InPage).document
            .querySelector("#throughput polyline")
            ?.getAttribute("points") ?? ""
        ).split(" ").length >= 6,
      undefined,
      { timeout: 60_000 },
    );
    await page.locator("#live").filter({ hasText: "live" }).waitFor();
    // Tasks finish while the page watches: its count of done tasks moves off zero.
    await page.waitForFunction(
      () =>
        Number(
          (
            (globalThis as unknown as InPage).document.querySelector("#tasks-done")?.textContent ?? ""
          ).replace(/,/g, ""),
        ) > 0,
      undefined,
      { timeout: 60_000 },
    );
    expect(await page.locator("#budget").textContent()).toMatch(/burst window|no request leased/);
    // What is spent says its unit and whose it is; an allowance the source never reported is not listed.
    expect(await page.locator("#budget").textContent()).toMatch(
      /spent on this account.*token units.*every run on/,
    );
    expect(await page.locator("#budget").textContent()).not.toContain("not reported yet");
    // Matched and already here are two facts, each with its own segment and count.
    expect(await page.locator("#legend").textContent()).toBe("importedmatchedalready hereskippedfailed");
    expect(await page.locator("#kinds .counts").first().textContent()).toMatch(
      /imported · [\d,]+ matched · [\d,]+ already here · /,
    );
    // Verification belongs to a finished run: not shown while it goes.
    expect(await page.locator("#verification").isHidden()).toBe(true);
    // The hostile account is text on the page, and nothing ran.
    expect(await page.locator("#run-meta").textContent()).toContain(HOSTILE_ACCOUNT);
    expect(await page.evaluate(() => (globalThis as unknown as InPage).__xss)).toBeUndefined();
    expect(await page.locator("#main img").count()).toBe(0);
    // Malformed rows of the sandbox show up as grouped reasons once they are noted.
    await page.locator("#notes tbody tr td.num").first().waitFor({ timeout: 60_000 });
    // The reasons follow the counts: as many failed rows in the table as in the bars.
    await page.waitForFunction(
      () => {
        const doc = (globalThis as unknown as InPage).document;
        const cells = (selector: string) =>
          [...doc.querySelectorAll(selector)].map((c) => c.textContent ?? "");
        const failed = cells("#kinds .counts").reduce(
          (n, t) => n + Number(/([\d,]+) failed/.exec(t)?.[1]?.replace(/,/g, "") ?? 0),
          0,
        );
        const noted = cells("#notes tbody tr")
          .filter((t) => t.includes("error"))
          .reduce((n, t) => n + Number(/^[\d,]+/.exec(t)?.[0]?.replace(/,/g, "") ?? 0), 0);
        return failed > 0 && noted === failed;
      },
      undefined,
      { timeout: 60_000 },
    );

    mkdirSync(join(REPO_ROOT, ".artifacts", "screenshots"), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    expect(statSync(SCREENSHOT).size).toBeGreaterThan(10_000);

    // Each reason group has its "Retry these" (a re-drive), enabled only once the run has finished.
    const redrive = page.locator("#notes tbody tr button.redrive");
    expect(await redrive.count()).toBeGreaterThan(0);
    expect(await redrive.first().isDisabled()).toBe(true);

    const before = await h.client.getRun({ runId });
    expect(before.run!.status).toBe(RunStatus.RUNNING);
    await page.locator("#stop").click();
    await page.locator("#run-status[data-status=stopping], #run-status[data-status=stopped]").waitFor();
    const stopped = await until(
      "the run to stop",
      async () => {
        const { run: now } = await h.client.getRun({ runId });
        return now!.status === RunStatus.STOPPED ? now : undefined;
      },
      60_000,
    );
    expect(stopped!.status).toBe(RunStatus.STOPPED);
    // The page follows: the run ends stopped, Resume becomes possible, Stop does not.
    await page.locator("#run-status[data-status=stopped]").waitFor({ timeout: 30_000 });
    // Nothing moves in a stopped run: the page's task counts are the run's.
    const taskCount = async (id: string) =>
      Number(((await page.locator(id).textContent()) ?? "").replace(/,/g, ""));
    expect(await taskCount("#tasks-done")).toBe(Number(stopped!.tasks!.succeeded));
    expect(await taskCount("#tasks-done")).toBeGreaterThan(0);
    expect(await taskCount("#tasks-running")).toBe(0);
    expect(await page.locator("#resume").isEnabled()).toBe(true);
    expect(await page.locator("#stop").isDisabled()).toBe(true);

    // Resume from the page: the run goes on and the page follows it live again; then stop it for good.
    await page.locator("#resume").click();
    await page.locator("#run-status[data-status=running]").waitFor({ timeout: 30_000 });
    expect((await h.client.getRun({ runId })).run!.status).toBe(RunStatus.RUNNING);
    await page.locator("#live").filter({ hasText: "live" }).waitFor({ timeout: 30_000 });
    await page.locator("#stop").click();
    await page.locator("#run-status[data-status=stopped]").waitFor({ timeout: 60_000 });
    expect(await page.locator("#problem").isHidden()).toBe(true);

    // Verified on demand, the stopped run's page shows the result with its per-kind table.
    const { verification } = await h.client.verifyRun({ runId });
    await page.reload();
    await page.locator("#verification-kinds tbody tr").first().waitFor({ timeout: 30_000 });
    expect(await page.locator("#verification-result").textContent()).toMatch(
      verification!.ok ? /^Passed: / : /^(Found problems|Could not finish)/,
    );
    expect(await page.locator("#verification-kinds tbody tr").count()).toBe(verification!.kinds.length);
    expect(problems).toEqual([]);
  });

  it("reverts a run from its page: the refusal names the later run, force goes on, and the revert run shows its progress per kind", async () => {
    const tenantId = "browser-revert";
    const start = async () =>
      (
        await h.client.startRun({
          tenantId,
          source: "crm",
          sourceAccount: "revert-account",
          sourceConfig: {
            baseUrl: h.cluster.sandboxUrl,
            apiToken: "browser-token",
            settings: { pageSize: "50" },
          },
          kinds: ["organizations", "persons"],
        })
      ).run!.id;
    const stop = async (runId: string) => {
      await h.client.stopRun({ runId });
      return until(
        `run ${runId} to stop`,
        async () => ((await h.client.getRun({ runId })).run!.status === RunStatus.STOPPED ? true : undefined),
        60_000,
      );
    };
    const created = async (runId: string, kind: string) => {
      const [row] = await h.database.db.execute<{ n: number }>(sql`
        select count(*)::int as n from drover.ledger where run_id = ${runId}::uuid and kind = ${kind} and action = 'created'`);
      return row!.n;
    };
    // Run A imports some organizations and persons and is stopped; run B, later, creates persons
    // in organizations A created: reverting A would leave B's contacts pointing at nothing.
    const a = await start();
    await until(
      "run A to create organizations and persons",
      async () =>
        (await created(a, "organizations")) > 0 && (await created(a, "persons")) > 0 ? true : undefined,
      60_000,
    );
    await stop(a);
    const b = await start();
    await until(
      "run B to link a contact to a company run A created",
      async () => {
        const [row] = await h.database.db.execute<{ n: number }>(sql`
          select count(*)::int as n from drover.ledger p
            join app.contacts c on c.company_id = p.record_id
            join drover.ledger o on o.record_type = 'contact' and o.record_id = c.id and o.run_id = ${b}::uuid
           where p.run_id = ${a}::uuid and p.action = 'created' and p.record_type = 'company'`);
        return row!.n > 0 ? true : undefined;
      },
      90_000,
    );
    await stop(b);

    const page = await browser.newPage({ viewport: { width: 1280, height: 1400 } });
    const problems: string[] = [];
    page.on("pageerror", (err) => problems.push(err.message));
    await enterKey(page, h.cluster.adminToken);
    await page.goto(`${h.cluster.dashboardUrl}#/runs/${a}`);
    await page.locator("#run-status[data-status=stopped]").waitFor({ timeout: 30_000 });
    // The action asks first; Cancel changes nothing.
    await page.locator("#revert").click();
    await page.locator("#revert-confirm").waitFor();
    expect(await page.locator("#revert-confirm").textContent()).toContain("Records it matched");
    await page.locator("#revert-cancel").click();
    expect(await page.locator("#revert-confirm").isHidden()).toBe(true);
    // Without force: refused, the coordinator's sentence shown, and run B linked.
    await page.locator("#revert").click();
    await page.locator("#revert-go").click();
    await page.locator("#revert-refusal").waitFor();
    expect(await page.locator("#revert-refusal").textContent()).toMatch(/depend on records run .* created/);
    expect(await page.locator(`#revert-runs a[href="#/runs/${b}"]`).count()).toBe(1);
    expect((await h.client.getRun({ runId: a })).run!.revert).toBeUndefined();
    // The refused revert is in the run's history at once, with the coordinator's reason.
    await page.locator("#history tr[data-outcome=FAILED_PRECONDITION]").waitFor();
    expect(await page.locator("#history tr[data-outcome=FAILED_PRECONDITION]").first().textContent()).toMatch(
      /RevertRun \(force=false\).*depend on records run/,
    );
    // With force: the revert run starts and its page opens.
    await page.locator("#revert-force").check();
    await page.locator("#revert-go").click();
    await page.waitForURL((url) => url.hash.startsWith("#/runs/") && !url.hash.includes(a), {
      timeout: 30_000,
    });
    const revertId = decodeURIComponent(new URL(page.url()).hash.slice("#/runs/".length));
    await page.locator("#run-status[data-status=succeeded]").waitFor({ timeout: 90_000 });
    expect(await page.locator("h1").last().textContent()).toBe(`Revert run ${revertId}`);
    expect(await page.locator("#run-revert").textContent()).toContain(`Revert of run ${a} (forced`);
    // Its own history begins with the call that started it.
    await page.locator("#history tr[data-outcome=ok]").waitFor();
    expect(await page.locator("#history tr[data-outcome=ok]").last().textContent()).toMatch(
      new RegExp(`RevertRun \\(force=true revert_run_id=${revertId}\\)ok`),
    );
    expect(await page.locator("#kinds-panel").isHidden()).toBe(true);
    // Per kind, in the order the revert goes (later phases first), the page's counts are the run's.
    const { run: done } = await h.client.getRun({ runId: revertId });
    const kinds = done!.revert!.kinds;
    expect(kinds.map((k) => k.kind)).toEqual(["organizations", "persons"]);
    await page.waitForFunction(
      (n) =>
        [...(globalThis as unknown as InPage).document.querySelectorAll("#revert-kinds tbody tr")].length ===
        n,
      kinds.length,
    );
    for (const k of kinds) {
      const cells = await page.locator(`#revert-kinds tr[data-kind="${k.kind}"] td.num`).allTextContents();
      expect(cells.map((c) => Number(c.replace(/,/g, "")))).toEqual([
        Number(k.removed),
        Number(k.gone),
        Number(k.kept),
        Number(k.total),
      ]);
    }
    expect(Number(done!.revert!.removed)).toBeGreaterThan(0);
    expect(await page.locator("#revert-summary").textContent()).toMatch(/records removed/);
    // What force cleared is noted on the revert run, grouped under Reasons.
    expect(await page.locator("#notes tbody").textContent()).toContain("forced: cleared");
    // A revert run is not itself revertable; the reverted run names its revert and offers no second one.
    expect(await page.locator("#revert").isHidden()).toBe(true);
    await page.locator(`#run-revert a[href="#/runs/${a}"]`).click();
    await page.locator(`#run-revert a[href="#/runs/${revertId}"]`).waitFor({ timeout: 30_000 });
    expect(await page.locator("#run-revert").textContent()).toContain(`Reverted by run ${revertId}`);
    expect(await page.locator("#revert").isHidden()).toBe(true);
    expect(problems).toEqual([]);
  });

  it("serves /metrics on every service process: coordinator, worker and dashboard", async () => {
    const { coordinators, workers, dashboard } = h.cluster;
    const expected: [typeof dashboard, string[]][] = [
      [coordinators[0], ["drover_tasks", "drover_runs", "drover_budget_daily_remaining"]],
      [
        workers[0],
        [
          "drover_rows_total",
          "drover_window_duration_seconds",
          "drover_worker_lease_wait_seconds",
          "drover_worker_deferrals_total",
        ],
      ],
      [dashboard, ["drover_dashboard_requests_total", "drover_dashboard_live_streams"]],
    ];
    for (const [service, names] of expected) {
      const url = String(service!.ready.metrics);
      const res = await fetch(url);
      expect(res.status, `${service!.name} ${url}`).toBe(200);
      const text = await res.text();
      for (const name of names) expect(text, `${service!.name} has ${name}`).toContain(`# HELP ${name} `);
    }
  });

  it("says why when the coordinator refuses: a wrong key brings the key form back with a sentence", async () => {
    const page = await browser.newPage();
    await enterKey(page, "drv_not-a-key-anyone-issued");
    await page.locator("#key-form").waitFor();
    expect(await page.locator("#problem").textContent()).toBe(
      "The coordinator does not accept this API key. Enter a valid key.",
    );
  });
});
