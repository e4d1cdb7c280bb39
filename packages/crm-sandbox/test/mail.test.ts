import { describe, expect, it } from "vitest";
import { get, type Json, sandbox, walk } from "./helpers.js";

interface Wrapped {
  object: string;
  timestamp: string;
  data: Json & { id: number; has_body_flag: number; body?: string | null };
}

describe("mail messages", () => {
  it("lists each deal's messages wrapped as mailMessage with globally unique ids matching the truth", async () => {
    const s = await sandbox({ seed: 4, deals: 200, mailPerDealMax: 3 });
    const truth = s.truth(["mail"]).kinds.mail;
    const ids: string[] = [];
    const perDeal: number[] = [];
    for (let dealId = 1; dealId <= 200; dealId++) {
      const items = (await walk(s, `/v1/deals/${dealId}/mailMessages`, 5)) as unknown as Wrapped[];
      perDeal.push(items.length);
      for (const item of items) {
        expect(item.object).toBe("mailMessage");
        expect(item.timestamp).toBe(item.data.message_time);
        // A message belongs to the deal whose list it is in: it names no deal itself.
        expect(item.data).not.toHaveProperty("deal_id");
        const id = String(item.data.id);
        const bodyless = truth.bodyless.includes(id);
        expect(item.data.has_body_flag).toBe(bodyless ? 0 : 1);
        // Not asked for bodies: one that has a body sends none; one without may say so anyway.
        if (truth.nullBodies.includes(id)) expect(item.data.body).toBeNull();
        else if (truth.emptyBodies.includes(id)) expect(item.data.body).toBe("");
        else expect(item.data).not.toHaveProperty("body");
        ids.push(id);
      }
    }
    expect(ids).toEqual(truth.ids);
    expect(new Set(ids).size).toBe(ids.length);
    const heavy = perDeal.filter((n) => n >= 8);
    expect(heavy.length).toBe(truth.heavyDeals.length);
    expect(heavy.length).toBeGreaterThan(5);
    expect(perDeal.every((n) => n <= 3 || (n >= 8 && n <= 12))).toBe(true);
    expect(perDeal.some((n) => n === 0)).toBe(true);
  });

  it("fetches one body per message, null or empty for the bodies the truth names", async () => {
    const s = await sandbox({ seed: 4, deals: 400, mailPerDealMax: 3 });
    const truth = s.truth(["mail"]).kinds.mail;
    expect(truth.nullBodies.length).toBeGreaterThan(0);
    expect(truth.emptyBodies.length).toBeGreaterThan(0);
    const fetchBody = async (id: string) => {
      const r = await get(s, `/v1/mailbox/mailMessages/${id}?include_body=1`);
      expect(r.status).toBe(200);
      return (r.body.data as Wrapped["data"]).body;
    };
    expect(await fetchBody(truth.nullBodies[0] as string)).toBeNull();
    expect(await fetchBody(truth.emptyBodies[0] as string)).toBe("");
    const absent = truth.bodyless.find(
      (id) => !truth.nullBodies.includes(id) && !truth.emptyBodies.includes(id),
    );
    const single = await get(s, `/v1/mailbox/mailMessages/${absent}?include_body=1`);
    expect(single.body.data).not.toHaveProperty("body");
    expect(single.body.data).toMatchObject({ has_body_flag: 0 });
    const regular = truth.ids.find((id) => !truth.bodyless.includes(id));
    expect(await fetchBody(regular as string)).toMatch(/^<html>.*<\/html>$/);
  });

  it("embeds bodies in the per-deal list when include_body=1, identical to the single fetch", async () => {
    const s = await sandbox({ seed: 4, deals: 100 });
    const dealId = Number(s.truth(["mail"]).kinds.mail.heavyDeals[0]);
    const items = (await walk(
      s,
      `/v1/deals/${dealId}/mailMessages?include_body=1`,
      100,
    )) as unknown as Wrapped[];
    expect(items.length).toBeGreaterThanOrEqual(8);
    // The list item is the message plus what only the list adds (MailMessageItemForList).
    const listOnly = new Set(["nylas_id", "s3_bucket", "s3_bucket_path", "external_deleted_flag"]);
    for (const key of ["mua_message_id", "template_id", "timestamp", "item_type", "company_id"])
      listOnly.add(key);
    for (const item of items) {
      const single = await get(s, `/v1/mailbox/mailMessages/${item.data.id}?include_body=1`);
      const message = Object.fromEntries(Object.entries(item.data).filter(([k]) => !listOnly.has(k)));
      expect(single.body.data).toEqual(message);
    }
  });

  it("answers 404 for an unknown deal or message", async () => {
    const s = await sandbox({ deals: 10 });
    const total = s.truth(["mail"]).kinds.mail.count;
    expect((await get(s, "/v1/deals/11/mailMessages")).status).toBe(404);
    expect((await get(s, `/v1/mailbox/mailMessages/${total + 1}`)).status).toBe(404);
    expect((await get(s, "/v1/mailbox/mailMessages/abc")).status).toBe(404);
  });

  it("serves no mail at all when mailPerDealMax is 0", async () => {
    const s = await sandbox({ deals: 50, mailPerDealMax: 0 });
    expect(s.truth(["mail"]).kinds.mail.count).toBe(0);
    expect((await get(s, "/v1/deals/1/mailMessages")).body.data).toBeNull();
  });
});
