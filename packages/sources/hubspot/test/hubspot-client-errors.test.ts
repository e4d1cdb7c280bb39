import { TransientError } from "@drover/provider-sdk";
import { describe, expect, it } from "vitest";
import { clientOf, sandbox } from "./helpers.js";

describe("HubSpot client errors", () => {
  it("resends a read that met a 502 (a POST read included) and, when the source stays down, fails it as transient", async () => {
    const s = await sandbox({ seed: 31, contacts: 5 });
    // The sandbox models no faults: a gateway in front of it answers 502 to the first `failing` calls.
    let failing = 2;
    const methods: string[] = [];
    const gateway: typeof fetch = async (input, init) => {
      methods.push(init?.method ?? "GET");
      if (failing-- > 0) return new Response("<html>502 Bad Gateway</html>", { status: 502 });
      return fetch(input, init);
    };
    const client = clientOf(s, { fetch: gateway });
    const body = await client.post<{ results: unknown[] }>(
      "/crm/v3/objects/contacts/batch/read",
      { inputs: [{ id: s.ids("contacts").live[0] }], properties: [] },
      "get",
    );
    expect(body.results).toHaveLength(1);
    expect(methods).toEqual(["POST", "POST", "POST"]);
    failing = 10;
    const err = await client.get("/crm/v3/objects/contacts", {}, "list").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransientError);
    expect((err as TransientError).repeatable).toBe(true);
  });
});
