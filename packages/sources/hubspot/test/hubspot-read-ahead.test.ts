import { describe, expect, it } from "vitest";
import type { ListPage } from "../src/list-pages.js";
import { readPagesAhead } from "../src/list-walk.js";

/** A list of `total` pages whose cursors are their numbers; every call is logged in the order made. */
function fakeList(total: number, log: string[], failAt?: number) {
  return {
    async list(after: string | null): Promise<ListPage | null> {
      const n = after === null ? 0 : Number(after);
      log.push(`list ${n}`);
      await new Promise((r) => setTimeout(r, 5));
      if (n === failAt) throw new Error(`page ${n} failed`);
      return { rows: [], after: n + 1 < total ? String(n + 1) : null, requests: 1 };
    },
    async rows(page: ListPage): Promise<string> {
      const n = page.after === null ? total - 1 : Number(page.after) - 1;
      log.push(`rows ${n}`);
      await new Promise((r) => setTimeout(r, 5));
      return `page ${n}`;
    },
  };
}

describe("a task's pages read ahead of its writes", () => {
  it("asks for the next page before this page's associations, so the chain's request takes the first slot", async () => {
    const log: string[] = [];
    const pages = readPagesAhead(fakeList(10, log), null, 6, new AbortController().signal);
    for (let i = 0; i < 6; i++) {
      expect(await pages.page(i)).toBe(`page ${i}`);
      pages.written(i);
    }
    for (let i = 0; i < 5; i++) expect(log.indexOf(`list ${i + 1}`)).toBeLessThan(log.indexOf(`rows ${i}`));
    // The task's last page hands its cursor on: nothing past it is listed here.
    expect(log).not.toContain("list 6");
  });

  it("lists no further than two pages past the one being written", async () => {
    const log: string[] = [];
    const pages = readPagesAhead(fakeList(10, log), null, 8, new AbortController().signal);
    await pages.page(0);
    await new Promise((r) => setTimeout(r, 60));
    // Nothing written yet: pages 0, 1 and 2 are listed, page 3 waits for page 0's write.
    expect(log.filter((e) => e.startsWith("list"))).toEqual(["list 0", "list 1", "list 2"]);
    pages.written(0);
    await pages.page(1);
    await new Promise((r) => setTimeout(r, 30));
    expect(log).toContain("list 3");
    expect(log).not.toContain("list 4");
    pages.abandon();
  });

  it("fails every page after one whose listing failed, and none before it", async () => {
    const log: string[] = [];
    const pages = readPagesAhead(fakeList(10, log, 2), null, 5, new AbortController().signal);
    expect(await pages.page(0)).toBe("page 0");
    pages.written(0);
    expect(await pages.page(1)).toBe("page 1");
    pages.written(1);
    await expect(pages.page(2)).rejects.toThrow("page 2 failed");
    await expect(pages.page(3)).rejects.toThrow("page 2 failed");
    expect(log).not.toContain("list 3");
  });

  it("ends at the list's end: a page past it is an error, not a silent empty page", async () => {
    const log: string[] = [];
    const pages = readPagesAhead(fakeList(2, log), null, 4, new AbortController().signal);
    expect(await pages.page(1)).toBe("page 1");
    await expect(pages.page(2)).rejects.toThrow("read past the list's end");
  });
});
