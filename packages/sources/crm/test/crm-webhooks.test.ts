import { type Sandbox, startSandbox } from "@drover/crm-sandbox";
import type { RunInfo } from "@drover/provider-sdk";
import { afterAll, describe, expect, it } from "vitest";
import { crmWebhooks, WebhookRegistrationError } from "../src/webhooks.js";

/** Registration and removal of a follow run's webhooks, against the sandbox's `/v1/webhooks`. */
const TOKEN = "webhook-test-token";
const sandboxes: Sandbox[] = [];
afterAll(async () => {
  await Promise.all(sandboxes.map((s) => s.close()));
});

async function account(options: { webhooksRefused?: number } = {}) {
  const s = await startSandbox({
    port: 0,
    organizations: 5,
    persons: 5,
    deals: 5,
    leads: 5,
    activities: 5,
    notes: 5,
    ...options,
  });
  sandboxes.push(s);
  const list = async () =>
    (
      (await (await fetch(`${s.url}/v1/webhooks`, { headers: { "x-api-token": TOKEN } })).json()) as {
        data: { event_object: string; event_action: string; version: string; http_auth_user: string }[];
      }
    ).data;
  return { s, list };
}

const run = (baseUrl: string, kinds: string[]): RunInfo => ({
  id: "6f1c0f7e-2d7a-4c57-9a55-0d4d2f3b9e10",
  tenantId: "t",
  source: "crm",
  sourceAccount: "a",
  kinds,
  plan: [kinds],
  sourceConfig: { baseUrl },
  startedAt: null,
});
const target = { url: "https://hooks.example.com/pipedrive/x", user: "drover-x", password: "p" };

describe("a follow run's webhooks at Pipedrive", () => {
  it("registers one v2 webhook per kind with the credential, and removes them (a second removal is no error)", async () => {
    const { s, list } = await account();
    const ids = await crmWebhooks.register(run(s.url, ["persons", "deals", "mail"]), TOKEN, target);
    expect(ids).toHaveLength(2);
    const hooks = await list();
    expect(hooks.map((h) => h.event_object).sort()).toEqual(["deal", "person"]);
    expect(
      hooks.every((h) => h.event_action === "*" && h.version === "2.0" && h.http_auth_user === "drover-x"),
    ).toBe(true);
    await crmWebhooks.remove(run(s.url, ["persons", "deals"]), TOKEN, ids);
    expect(await list()).toEqual([]);
    await crmWebhooks.remove(run(s.url, ["persons", "deals"]), TOKEN, ids);
  });

  it("refuses with the source's answer and leaves nothing registered when Pipedrive refuses", async () => {
    const { s, list } = await account({ webhooksRefused: 1 });
    const refused = crmWebhooks.register(run(s.url, ["persons", "deals"]), TOKEN, target);
    await expect(refused).rejects.toBeInstanceOf(WebhookRegistrationError);
    await expect(refused).rejects.toThrow(/Pipedrive refused the person webhook \(HTTP 403: /);
    expect(await list()).toEqual([]);
  });

  it("refuses a run of mail alone, which no webhook reports", async () => {
    const { s } = await account();
    await expect(crmWebhooks.register(run(s.url, ["mail"]), TOKEN, target)).rejects.toThrow(
      /none of the run's kinds/,
    );
  });
});
