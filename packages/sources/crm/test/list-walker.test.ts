import { startSandbox } from "@drover/crm-sandbox";
import { type BudgetPacer, SourceClient } from "@drover/provider-sdk";
import { describe, expect, it } from "vitest";
import { pipedriveAdapter } from "../src/client.js";
import { sourceId } from "../src/fields.js";
import { readListPage, readWholeList } from "../src/list-walker.js";
import { KIND_LISTS } from "../src/lists.js";

const pacer: BudgetPacer = {
  graceMs: Number.POSITIVE_INFINITY,
  acquire: async (_cost, _signal, count = 1) => Array.from({ length: count }, () => Date.now()),
  absorb: () => {},
};

describe("the list walker", () => {
  it("reads every list whole as the import reads it page by page: v2 by cursor, v1 by offset, pages side by side or not", async () => {
    const sandbox = await startSandbox({
      port: 0,
      tokens: ["pd-token"],
      organizations: 23,
      persons: 41,
      deals: 37,
      leads: 29,
      activities: 19,
      notes: 31,
    });
    try {
      const client = new SourceClient({
        baseUrl: sandbox.url,
        apiToken: "pd-token",
        adapter: pipedriveAdapter(),
        pacer,
      });
      const truth = sandbox.truth();
      for (const [kind, lists] of Object.entries(KIND_LISTS)) {
        const whole: string[] = [];
        const paged: string[] = [];
        for (const list of lists) {
          for (const pagesAtOnce of [1, 3]) {
            const rows = await readWholeList(client, list, 5, { pagesAtOnce });
            if (pagesAtOnce === 1) whole.push(...rows.map((r) => sourceId(r)!));
            else
              expect(rows.map((r) => sourceId(r))).toEqual(
                (await readWholeList(client, list, 5)).map((r) => sourceId(r)),
              );
          }
          // Page by page, as import tasks walk it: each page's successor from the walker's answer.
          let at: { cursor?: string | null; start?: number } =
            list.api === "v2" ? { cursor: null } : { start: 0 };
          for (;;) {
            const page = await readListPage(client, list, at, 5);
            paged.push(...page.rows.map((r) => sourceId(r)!));
            if (!page.more) break;
            at = list.api === "v2" ? { cursor: page.nextCursor } : { start: (at.start ?? 0) + 5 };
          }
        }
        expect(paged).toEqual(whole);
        expect(new Set(whole).size).toBe(whole.length);
        const expected = truth.kinds[kind as keyof typeof truth.kinds]?.ids ?? [];
        expect(new Set(whole), kind).toEqual(new Set(expected));
      }
    } finally {
      await sandbox.close();
    }
  });
});
