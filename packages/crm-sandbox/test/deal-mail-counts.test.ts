import { describe, expect, it } from "vitest";
import { startSandbox } from "../src/index.js";

/**
 * The v2 deal lists answer `include_fields=email_messages_count` as Pipedrive's reference documents
 * it: each deal carries the number of messages its mail list holds; a value outside the documented
 * enum is a 400; `--deal-mail-counts` makes an account that ignores or refuses the parameter.
 */
const get = async (url: string) => {
  const res = await fetch(url, { headers: { "x-api-token": "t" } });
  return { status: res.status, body: (await res.json()) as { data: Record<string, unknown>[] | null } };
};

describe("include_fields=email_messages_count", () => {
  it("gives each deal the count of messages its mail list holds, on the deal list and the archived one", async () => {
    const s = await startSandbox({ port: 0, deals: 30, archivedRate: 0.2, mailPerDealMax: 4 });
    try {
      for (const list of ["/api/v2/deals?status=open,won,lost,deleted&", "/api/v2/deals/archived?"]) {
        const { status, body } = await get(`${s.url}${list}limit=500&include_fields=email_messages_count`);
        expect(status).toBe(200);
        expect(body.data!.length).toBeGreaterThan(0);
        for (const deal of body.data!) {
          const mail = await get(`${s.url}/v1/deals/${deal.id}/mailMessages?limit=500`);
          expect(deal.email_messages_count, `deal ${deal.id}`).toBe(mail.body.data?.length ?? 0);
        }
      }
      const plain = await get(`${s.url}/api/v2/deals?limit=5`);
      expect(plain.body.data![0]).not.toHaveProperty("email_messages_count");
      const other = await get(`${s.url}/api/v2/deals?limit=5&include_fields=notes_count`);
      expect(other.status).toBe(200);
      expect(other.body.data![0]).not.toHaveProperty("email_messages_count");
      expect((await get(`${s.url}/api/v2/deals?include_fields=bogus`)).status).toBe(400);
    } finally {
      await s.close();
    }
  });

  it("is left out by an account that ignores it and refused with a 400 by one that refuses it", async () => {
    const ignoring = await startSandbox({ port: 0, deals: 5, dealMailCounts: 0 });
    const refusing = await startSandbox({ port: 0, deals: 5, dealMailCounts: 2 });
    try {
      const ignored = await get(`${ignoring.url}/api/v2/deals?include_fields=email_messages_count`);
      expect(ignored.status).toBe(200);
      expect(ignored.body.data![0]).not.toHaveProperty("email_messages_count");
      expect((await get(`${refusing.url}/api/v2/deals?include_fields=email_messages_count`)).status).toBe(
        400,
      );
      expect((await get(`${refusing.url}/api/v2/deals`)).status).toBe(200);
    } finally {
      await Promise.all([ignoring.close(), refusing.close()]);
    }
  });
});
