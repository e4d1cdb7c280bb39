import { describe, expect, it } from "vitest";
import { parsePgTableSettings } from "../src/config.js";
import { slotSeeds, slotsOf } from "../src/slots.js";
import { decodeUlidTime, encodeUlidTime, makeUlid, ulidFloor } from "../src/ulid.js";

const base = {
  table: "public.room_events",
  destination: "app.room_events",
  mapping: "id=id,room_id=room_id,data=data",
  tenantColumn: "tenant_id",
  from: "2024-10-01T00:00:00Z",
  to: "2024-10-01T05:30:00Z",
};

describe("ULID time and slot bounds", () => {
  it("encodes the millisecond time as the ULID's ten leading characters", () => {
    // The ULID spec's example: 01ARYZ6S41 is 1469918176385 ms.
    expect(encodeUlidTime(1469918176385)).toBe("01ARYZ6S41");
    expect(decodeUlidTime("01ARYZ6S41TSV4RRFFQ69G5FAV")).toBe(1469918176385);
    expect(decodeUlidTime(makeUlid(1_700_000_000_123))).toBe(1_700_000_000_123);
  });

  it("puts a ULID in exactly one slot: adjacent slots share a bound, the lower inclusive", () => {
    const config = parsePgTableSettings(base);
    if (typeof config === "string") throw new Error(config);
    const slots = slotsOf(config);
    expect(slots).toHaveLength(6);
    expect(slots.at(-1)).toEqual({
      from: Date.parse("2024-10-01T05:00:00Z"),
      to: Date.parse("2024-10-01T05:30:00Z"),
    });
    for (let i = 1; i < slots.length; i++) expect(slots[i]!.from).toBe(slots[i - 1]!.to);
    const edge = slots[2]!.from;
    const inSlot = (id: string) =>
      slots.filter((s) => id >= ulidFloor(s.from) && id < ulidFloor(s.to)).length;
    // The first ULID of the boundary millisecond, the last one of the millisecond before, and a random one.
    expect(inSlot(ulidFloor(edge))).toBe(1);
    expect(inSlot(`${encodeUlidTime(edge - 1)}ZZZZZZZZZZZZZZZZ`)).toBe(1);
    expect(inSlot(makeUlid(edge + 17))).toBe(1);
    expect(slots.find((s) => ulidFloor(edge) >= ulidFloor(s.from) && ulidFloor(edge) < ulidFloor(s.to))).toBe(
      slots[2],
    );
  });

  it("seeds newest first, one task per slot", () => {
    const config = parsePgTableSettings({ ...base, slotWidth: "2h" });
    if (typeof config === "string") throw new Error(config);
    expect(slotSeeds(config).map((s) => s.seedKey)).toEqual([
      "slot:2024-10-01T04:00:00.000Z",
      "slot:2024-10-01T02:00:00.000Z",
      "slot:2024-10-01T00:00:00.000Z",
    ]);
  });

  it("refuses identifiers that could not be quoted safely, and a mapping without the key", () => {
    expect(parsePgTableSettings({ ...base, table: 'public."x"; drop table y' })).toMatch(
      /lower-case identifiers/,
    );
    expect(parsePgTableSettings({ ...base, mapping: "id=id,data=data;--" })).toMatch(
      /not destination=source/,
    );
    expect(parsePgTableSettings({ ...base, mapping: "room_id=room_id" })).toMatch(/must copy id/);
    expect(parsePgTableSettings({ ...base, slotWidth: "1w" })).toMatch(/slotWidth/);
    expect(parsePgTableSettings({ ...base, connection: "postgres://x" })).toMatch(/unknown setting/);
  });
});
