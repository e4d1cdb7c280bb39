import { RowError } from "@drover/provider-sdk";
import { describe, expect, it } from "vitest";
import { parseActivity, parseDeal, parseEmail, parseLead, parseNote, parsePerson } from "../src/records.js";

const person = {
  id: 7,
  name: "Ada Lovelace",
  email: [{ label: "work", value: "ada@example.com", primary: true }],
  phone: [{ label: "work", value: "+44 1", primary: true }],
  org_id: { value: 3, name: "Analytical Engines" },
  add_time: "2024-01-02 03:04:05",
  owner_id: { id: 1, name: "Owner", value: 1 },
};

describe("crm records", () => {
  it("reads an id whether it comes plain or expanded with value", () => {
    expect(parsePerson(person).organization).toBe("3");
    expect(parsePerson({ ...person, org_id: 3 }).organization).toBe("3");
    expect(parsePerson({ ...person, org_id: null }).organization).toBeNull();
  });

  it("takes a v1 person without email as having none", () => {
    expect(parsePerson({ ...person, email: [{ value: "", primary: true }] }).email).toBeNull();
    expect(parsePerson({ ...person, email: [] }).email).toBeNull();
  });

  it("picks the primary email, and v2's `emails` too", () => {
    const v2 = {
      ...person,
      email: undefined,
      emails: [
        { value: "b@x.io", primary: false },
        { value: "a@x.io", primary: true },
      ],
    };
    expect(parsePerson(v2).email).toBe("a@x.io");
  });

  it("names the field that makes a row malformed", () => {
    const cases: [() => unknown, RegExp][] = [
      [() => parsePerson({ ...person, name: 12345 }), /name is not text/],
      [() => parsePerson({ ...person, email: [{ value: "not-an-email", primary: true }] }), /not an email/],
      [() => parsePerson({ ...person, org_id: "garbage" }), /org_id is not a record id/],
      [() => parsePerson({ ...person, add_time: "not-a-date" }), /add_time is not a date/],
      [() => parseDeal({ id: 1, title: "t", value: "lots" }), /value is not a number/],
      [() => parseDeal({ id: 1 }), /title is missing/],
      [() => parseActivity({ id: 1, subject: "s", due_date: "not-a-date" }), /due_date is not a date/],
      [() => parseNote({ id: 1, content: 5 }), /content is not text/],
      [() => parseEmail({ id: 1, subject: 5 }, "9", null), /subject is not text/],
    ];
    for (const [parse, reason] of cases) {
      expect(parse).toThrow(RowError);
      expect(parse).toThrow(reason);
    }
  });

  it("keeps a note's every parent, and leads' UUID ids", () => {
    const lead = "3f1e2d4c-5b6a-4789-8abc-def012345678";
    expect(
      parseNote({ id: 1, content: "<p>hi</p>", deal_id: 4, person_id: 5, org_id: null, lead_id: lead }),
    ).toMatchObject({
      deal: "4",
      person: "5",
      organization: null,
      lead,
    });
    expect(
      parseLead({ id: lead, title: "L", organization_id: 8, value: { amount: 10, currency: "EUR" } }),
    ).toMatchObject({
      organization: "8",
      amount: 10,
      currency: "EUR",
    });
  });

  it("keeps v1 hash-keyed and v2 custom fields", () => {
    const key = "a".repeat(40);
    expect(
      parseDeal({ id: 1, title: "t", [key]: "Retail", custom_fields: { tier: "gold" } }).customFields,
    ).toEqual({
      tier: "gold",
      [key]: "Retail",
    });
  });

  it("keeps a custom field's companions with it, on every kind, v1 and v2", () => {
    const key = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00";
    const lead = "3f1e2d4c-5b6a-4789-8abc-def012345678";
    expect(
      parseLead({ id: lead, title: "L", organization_id: 8, [key]: 800, [`${key}_currency`]: "EUR" })
        .customFields,
    ).toEqual({ [key]: 800, [`${key}_currency`]: "EUR" });
    const range = "d".repeat(40);
    const address = "e".repeat(40);
    const v1 = {
      [range]: "2026-01-01",
      [`${range}_until`]: "2026-03-31",
      [address]: "1 Main Street, Springfield",
      [`${address}_route`]: "Main Street",
      [`${address}_street_number`]: "1",
      [`${address}_formatted_address`]: "1 Main Street, Springfield, US",
      [`${address}_postal_code`]: null,
    };
    const { [`${address}_postal_code`]: _, ...kept } = v1;
    expect(parseDeal({ id: 1, title: "t", ...v1 }).customFields).toEqual(kept);
    expect(parsePerson({ ...person, ...v1 }).customFields).toEqual(kept);
    expect(parseNote({ id: 1, content: "c", ...v1 }).customFields).toEqual(kept);
    expect(parseActivity({ id: 1, subject: "s", ...v1 }).customFields).toEqual(kept);
    // A key that merely starts like one is no custom field.
    expect(parseDeal({ id: 1, title: "t", [`${key}x`]: 1, [`${key}-y`]: 2 }).customFields).toBeNull();
    const v2 = {
      [key]: { value: 800, currency: "EUR" },
      [address]: { value: "1 Main St", route: "Main St" },
    };
    expect(parseDeal({ id: 1, title: "t", custom_fields: v2 }).customFields).toEqual(v2);
    // A field without a value reads alike from v1 (null or left out) and v2 (null): not kept.
    expect(parseDeal({ id: 1, title: "t", custom_fields: { ...v2, [range]: null } }).customFields).toEqual(
      v2,
    );
    expect(parseDeal({ id: 1, title: "t", custom_fields: { [range]: null } }).customFields).toBeNull();
  });

  it("reads a mail message whose body is absent, null or empty", () => {
    const msg = {
      id: 3,
      subject: "Re: offer",
      from: [{ email_address: "a@b.c" }],
      to: [{ email_address: "d@e.f" }],
      message_time: "2024-05-01 10:00:00",
    };
    expect(parseEmail(msg, "9", null)).toMatchObject({
      deal: "9",
      subject: "Re: offer",
      from: "a@b.c",
      to: ["d@e.f"],
      body: null,
    });
  });
});
