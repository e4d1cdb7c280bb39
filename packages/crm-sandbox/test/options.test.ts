import { describe, expect, it } from "vitest";
import { CliError, parseCliArgs } from "../src/cli-args.js";
import { OptionsError, resolveOptions } from "../src/index.js";

describe("options", () => {
  it("fills defaults", () => {
    const o = resolveOptions();
    expect(o).toMatchObject({
      seed: 42,
      organizations: 1500,
      persons: 4000,
      burstLimit: 0,
      abuseThreshold: 3,
    });
    expect(o.tokens).toBeNull();
  });

  it("reports every invalid option at once", () => {
    try {
      resolveOptions({ seed: -1, malformedRate: 2, deals: 1.5, bogus: 1 } as never);
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(OptionsError);
      const issues = (error as OptionsError).issues.join("\n");
      for (const key of ["seed", "malformedRate", "deals", "bogus"]) expect(issues).toContain(key);
    }
  });
});

describe("CLI arguments", () => {
  it("parses flags in both spellings and lets flags win over SANDBOX_ variables", () => {
    const options = parseCliArgs(["--", "--seed", "7", "--mail-per-deal-max=5", "--tokens", "a,b"], {
      SANDBOX_SEED: "1",
      SANDBOX_PERSONS: "12",
      SANDBOX_BURST_LIMIT: "40",
    });
    expect(options).toEqual({
      seed: 7,
      persons: 12,
      burstLimit: 40,
      mailPerDealMax: 5,
      tokens: ["a", "b"],
    });
  });

  it("rejects unknown flags, missing values and non-numbers with a message naming the flag", () => {
    expect(() => parseCliArgs(["--sede", "7"])).toThrow(/unknown flag --sede/);
    expect(() => parseCliArgs(["--seed"])).toThrow(/--seed: missing value/);
    expect(() => parseCliArgs(["--deals", "many"])).toThrow(CliError);
    expect(() => parseCliArgs(["--token-costs", "list=20"])).toThrow(/unknown flag --token-costs/);
  });
});
