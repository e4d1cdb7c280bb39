import { describe, expect, it } from "vitest";
import { ConfigError, intVar, parseEnv, postgresUrl, z } from "../src/index.js";

const schema = z.object({ DATABASE_URL: postgresUrl("postgres://x@h/db"), LANE: intVar(1, 64, 4) });

describe("configuration", () => {
  it("fills defaults when nothing is set", () => {
    expect(parseEnv(schema, {})).toEqual({ DATABASE_URL: "postgres://x@h/db", LANE: 4 });
  });

  it("names every bad variable and what to fix, at once", () => {
    try {
      parseEnv(schema, { DATABASE_URL: "mysql://nope", LANE: "abc" });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const message = (err as Error).message;
      expect(message).toContain("DATABASE_URL: must be a postgres:// URL");
      expect(message).toContain('LANE: must be a number (got "abc")');
    }
  });

  it("rejects out-of-range integers with the bound", () => {
    expect(() => parseEnv(schema, { LANE: "0" })).toThrow(/LANE: must be at least 1/);
  });
});
