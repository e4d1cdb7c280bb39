import { describe, expect, it } from "vitest";
import { parseDemoFlags } from "../src/flags.js";

describe("the demo's flags", () => {
  it("runs the CRM (Pipedrive) sandbox unless --source says otherwise", () => {
    const flags = parseDemoFlags(["--scale", "0.01"]);
    expect(flags.source).toBe("crm");
    expect(flags.sizes).toEqual({
      organizations: 15,
      persons: 40,
      deals: 30,
      leads: 10,
      activities: 40,
      notes: 30,
    });
    expect(flags.sandbox).toMatchObject({ "mail-per-deal-max": 3, "malformed-rate": 0.005 });
  });

  it("sizes HubSpot's sandbox by its own object types, with its own flags", () => {
    const flags = parseDemoFlags([
      "--",
      "--source",
      "hubspot",
      "--scale",
      "0.1",
      "--deals",
      "7",
      "--archived-rate",
      "0.2",
    ]);
    expect(flags.source).toBe("hubspot");
    expect(flags.sizes).toEqual({ companies: 150, contacts: 400, deals: 7, engagements: 60 });
    expect(flags.sandbox).toMatchObject({
      "archived-rate": 0.2,
      "custom-properties": 20,
      "ten-second-limit": 100,
    });
    expect(flags.sandbox).not.toHaveProperty("malformed-rate");
  });

  it("refuses a flag of the other source's sandbox, and an unknown source, saying what to use", () => {
    expect(() => parseDemoFlags(["--source", "hubspot", "--persons", "5"])).toThrow(
      "--persons is not a flag of --source hubspot's sandbox",
    );
    expect(() => parseDemoFlags(["--archived-rate", "0.1"])).toThrow(
      "--archived-rate is not a flag of --source crm's sandbox",
    );
    expect(() => parseDemoFlags(["--source", "salesforce"])).toThrow(
      '--source must be crm (Pipedrive) or hubspot, got "salesforce"',
    );
  });
});
