import { describe, expect, it } from "vitest";
import { ROW_KINDS, type RowKind } from "../src/index.js";
import { type Json, sandbox, walk } from "./helpers.js";

const DATE_TIME = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/;
/** The leads API writes ISO 8601 with milliseconds. */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const isRef = (v: unknown) => v === null || (typeof v === "object" && typeof (v as Json).value === "number");
const isIntOrNull = (v: unknown) => v === null || Number.isInteger(v);

/** What a consumer would check; every malformed row must fail it and every other row pass it. */
const VALID: Record<RowKind | "mail", (r: Json) => boolean> = {
  organizations: (r) => typeof r.name === "string" && DATE_TIME.test(String(r.add_time)) && isRef(r.owner_id),
  persons: (r) =>
    typeof r.name === "string" &&
    DATE_TIME.test(String(r.add_time)) &&
    isRef(r.org_id) &&
    /^$|@/.test(String((r.email as Json[])[0]?.value)),
  deals: (r) =>
    typeof r.title === "string" &&
    typeof r.value === "number" &&
    DATE_TIME.test(String(r.add_time)) &&
    isRef(r.org_id),
  leads: (r) =>
    typeof r.title === "string" && ISO_TIME.test(String(r.add_time)) && isIntOrNull(r.organization_id),
  activities: (r) =>
    typeof r.subject === "string" && /^\d{4}-\d{2}-\d{2}$/.test(String(r.due_date)) && isIntOrNull(r.deal_id),
  notes: (r) => typeof r.content === "string" && DATE_TIME.test(String(r.add_time)) && isIntOrNull(r.deal_id),
  mail: (r) => typeof r.subject === "string" && DATE_TIME.test(String(r.message_time)),
};

describe("malformed rows", () => {
  it("breaks exactly the rows listed in truth.malformed while keeping their ids", async () => {
    const s = await sandbox({
      seed: 13,
      malformedRate: 0.1,
      deals: 150,
      activities: 500,
      notes: 500,
      archivedRate: 0,
    });
    const truth = s.truth();
    for (const kind of ROW_KINDS) {
      const rows = await walk(s, kind === "activities" ? "/v1/activities?user_id=0" : `/v1/${kind}`, 500);
      expect(
        rows.map((r) => String(r.id)),
        kind,
      ).toEqual(truth.kinds[kind].ids);
      const bad = rows.filter((r) => !VALID[kind](r)).map((r) => String(r.id));
      expect(truth.kinds[kind].malformed.length, kind).toBeGreaterThan(0);
      expect(bad, kind).toEqual(truth.kinds[kind].malformed);
    }
    const mail: Json[] = [];
    for (let dealId = 1; dealId <= 150; dealId++) {
      const items = await walk(s, `/v1/deals/${dealId}/mailMessages`, 100);
      mail.push(...items.map((i) => i.data as Json));
    }
    const badMail = mail.filter((m) => !VALID.mail(m)).map((m) => String(m.id));
    expect(badMail.length).toBeGreaterThan(0);
    expect(badMail).toEqual(truth.kinds.mail.malformed);
  });

  it("serves the same malformed rows on every request", async () => {
    const s = await sandbox({ seed: 13, malformedRate: 0.2, persons: 200 });
    const first = await walk(s, "/v1/persons", 100);
    const second = await walk(s, "/v1/persons", 100);
    expect(second).toEqual(first);
  });

  it("serves no malformed rows by default", async () => {
    const s = await sandbox({ seed: 13 });
    for (const kind of ROW_KINDS) expect(s.truth([kind]).kinds[kind].malformed).toEqual([]);
  });
});
