import { describe, expect, it } from "vitest";
import { get, type Json, sandbox, walk } from "./helpers.js";

interface Email {
  label?: string;
  value: string;
  primary: boolean;
}

describe("persons", () => {
  it("shows a person without email as one empty primary entry, as v1 does", async () => {
    const s = await sandbox({ seed: 21, persons: 2000 });
    const truth = s.truth(["persons"]).kinds.persons;
    const rows = await walk(s, "/v1/persons", 500);
    const byId = new Map(rows.map((r) => [String(r.id), r]));
    expect(truth.withoutEmail.length).toBeGreaterThan(2000 * 0.03);
    expect(truth.withoutEmail.length).toBeLessThan(2000 * 0.08);
    for (const id of truth.withoutEmail) expect(byId.get(id)?.email).toEqual([{ value: "", primary: true }]);
    const emails = rows.filter((r) => !truth.withoutEmail.includes(String(r.id)));
    for (const r of emails)
      expect((r.email as Email[])[0]?.value).toMatch(/^[a-z]+\.[a-z]+\.\d+@example-\d+\.com$/);
  });

  it("repeats an earlier person's email for about 2% of persons", async () => {
    const s = await sandbox({ seed: 21, persons: 2000 });
    const truth = s.truth(["persons"]).kinds.persons;
    const rows = await walk(s, "/v1/persons", 500);
    const emailOf = (r: Json) => (r.email as Email[])[0]?.value;
    expect(truth.duplicateEmails.length).toBeGreaterThan(2000 * 0.01);
    expect(truth.duplicateEmails.length).toBeLessThan(2000 * 0.035);
    const firstSeen = new Map<string, number>();
    const repeated: string[] = [];
    for (const r of rows) {
      const email = emailOf(r);
      if (!email) continue;
      if (firstSeen.has(email)) repeated.push(String(r.id));
      else firstSeen.set(email, r.id as number);
    }
    expect(repeated).toEqual(truth.duplicateEmails);
  });
});

describe("notes and activities parents", () => {
  it("lists as orphans exactly the rows whose parents all point past the generated ids", async () => {
    const sizes = { organizations: 40, persons: 60, deals: 50, leads: 30, activities: 900, notes: 900 };
    const s = await sandbox({ seed: 8, ...sizes });
    const leadIds = new Set(s.truth(["leads"]).kinds.leads.ids);
    for (const kind of ["notes", "activities"] as const) {
      const truth = s.truth([kind]).kinds[kind];
      expect(truth.orphans.length, kind).toBeGreaterThan(5);
      expect(truth.orphans.length, kind).toBeLessThan(900 * 0.07);
      const rows = await walk(s, kind === "activities" ? "/v1/activities?user_id=0" : "/v1/notes", 500);
      const orphans: string[] = [];
      for (const r of rows) {
        const refs = [
          [r.deal_id, sizes.deals],
          [r.person_id, sizes.persons],
          [r.org_id, sizes.organizations],
        ] as const;
        const set = refs.filter(([v]) => v !== null);
        const live =
          set.filter(([v, max]) => (v as number) <= max).length + (leadIds.has(r.lead_id as string) ? 1 : 0);
        const anyRef = set.length > 0 || r.lead_id !== null;
        expect(anyRef, `${kind} ${r.id} has a parent`).toBe(true);
        if (live === 0) orphans.push(String(r.id));
      }
      expect(orphans, kind).toEqual(truth.orphans);
    }
  });

  it("lets a note point at a deal, its person and its organization at once", async () => {
    const s = await sandbox({ seed: 8, notes: 200 });
    const rows = await walk(s, "/v1/notes", 200);
    expect(rows.some((r) => r.deal_id !== null && r.person_id !== null && r.org_id !== null)).toBe(true);
    expect(rows.some((r) => typeof r.lead_id === "string")).toBe(true);
  });

  it("gives leads v4-shaped UUID ids and organization_id rather than org_id", async () => {
    const s = await sandbox({ seed: 8, leads: 50 });
    const rows = await walk(s, "/v1/leads", 50);
    for (const r of rows) {
      expect(r.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(r).toHaveProperty("organization_id");
      expect(r).not.toHaveProperty("org_id");
    }
    expect((await get(s, `/v1/leads/${rows[0]?.id}`)).status).toBe(200);
  });
});
