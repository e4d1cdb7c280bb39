import { describe, expect, it } from "vitest";
import { startSandbox } from "../src/index.js";

/**
 * The sandbox's own yardstick for token efficiency: the fewest tokens Pipedrive's API allows for
 * importing its account and catching up, at the published cost of each endpoint.
 */
const SIZES = {
  organizations: 3,
  persons: 600,
  deals: 40,
  leads: 5,
  activities: 0,
  notes: 0,
  archivedRate: 0.2,
};

async function dealsWithMail(url: string): Promise<number> {
  let n = 0;
  for (const list of ["/api/v2/deals?status=open,won,lost,deleted&", "/api/v2/deals/archived?"]) {
    const res = await fetch(`${url}${list}limit=500&include_fields=email_messages_count`, {
      headers: { "x-api-token": "t" },
    });
    const body = (await res.json()) as { data: { email_messages_count: number }[] };
    n += body.data.filter((d) => d.email_messages_count > 0).length;
  }
  return n;
}

describe("the token minimum", () => {
  it("is each list at 500 rows a page, one mail list per deal with mail, and one page per list for a catch-up with nothing new", async () => {
    const sandbox = await startSandbox({ port: 0, ...SIZES, mailPerDealMax: 3 });
    try {
      const withMail = await dealsWithMail(sandbox.url);
      const minimum = sandbox.minimum();
      expect(minimum.dealsWithMail).toBe(withMail);
      expect(minimum.bodies).toBe("list");
      // orgs 10, persons 2 pages 20, deals 10, archived deals 20, leads 20, archived leads 40, activities 10, notes 20.
      expect(minimum.import.tokens).toBe(150 + 20 * withMail);
      expect(minimum.catchUp.tokens).toBe(140);
      expect(minimum.tokens).toBe(290 + 20 * withMail);
      const served = (await (await fetch(`${sandbox.url}/__sandbox/minimum`)).json()) as { tokens: number };
      expect(served.tokens).toBe(minimum.tokens);
    } finally {
      await sandbox.close();
    }
  });

  it("counts a body by id, 2 tokens, for each message with a body where the lists carry none", async () => {
    const sandbox = await startSandbox({ port: 0, ...SIZES, mailPerDealMax: 3, listIncludeBody: 0 });
    try {
      const mail = sandbox.truth(["mail"]).kinds.mail;
      const minimum = sandbox.minimum();
      expect(minimum.bodies).toBe("fetch");
      expect(minimum.import.mailBodies).toBe(mail.count - mail.bodyless.length);
      expect(minimum.import.tokens).toBe(150 + 20 * minimum.dealsWithMail + 2 * minimum.import.mailBodies);
    } finally {
      await sandbox.close();
    }
  });
});
