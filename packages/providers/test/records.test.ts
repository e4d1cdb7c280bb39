import { RowError } from "@drover/provider-sdk";
import { describe, expect, it } from "vitest";
import {
  parseActivity,
  parseDeal,
  parseEmail,
  parseLead,
  parseNote,
  parsePerson,
} from "../src/crm/records.js";

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
