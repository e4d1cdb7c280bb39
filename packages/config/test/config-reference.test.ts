import { describe, expect, it } from "vitest";
import { headingAnchor, renderConfigReference, settingDocs } from "../src/config-reference.js";
import { address, intVar, metricsPort, z } from "../src/index.js";

describe("the configuration reference's reading of a schema", () => {
  it("shows an integer's bounds, its default and its description", () => {
    const [doc] = settingDocs(z.object({ DROVER_X_MS: intVar(100, 600_000, 2_000).describe("How often.") }));
    expect(doc).toEqual({
      name: "DROVER_X_MS",
      type: "integer, 100 to 600000",
      default: "`2000`",
      description: "How often.",
    });
  });

  it("names the form a helper checks, through a transform, and the helper's own description", () => {
    const [port, addr] = settingDocs(
      z.object({ P: metricsPort(9464), A: address("127.0.0.1:1").describe("Where.") }),
    );
    expect(port).toMatchObject({ type: "port, or `off`", default: "`9464`" });
    expect(port?.description).toContain("`off` serves none");
    expect(addr).toMatchObject({ type: "`host:port`", default: "`127.0.0.1:1`", description: "Where." });
  });

  it("lists an enum's values, and says none for an optional setting unless a shown default is given", () => {
    const docs = settingDocs(
      z.object({
        MODE: z.enum(["a", "b"]).default("a"),
        OLD_NAME: intVar(1, 2, 1).optional(),
        TOKEN: z.string().optional().meta({ shownDefault: "required" }),
        KEY_FILE: z.string().optional(),
      }),
    );
    expect(docs.map((d) => [d.type, d.default])).toEqual([
      ["one of `a`, `b`", "`a`"],
      ["integer, 1 to 2", "none"],
      ["text", "required"],
      ["file path", "none"],
    ]);
  });

  it("indexes each variable under every reader, escaping pipes in cells", () => {
    const text = renderConfigReference({
      preamble: "# Ref",
      shared: { names: ["S"], note: "(shared)" },
      services: [
        {
          title: "One",
          source: "one.ts",
          intro: "First.",
          schema: z.object({ S: intVar(1, 2, 1).describe("a | b") }),
        },
        { title: "Two", source: "two.ts", intro: "Second.", schema: z.object({ S: intVar(1, 2, 2) }) },
      ],
      others: { title: "Others", intro: "Rest.", settings: [] },
    });
    expect(text).toContain("| `S` | [one](#one), [two](#two) |");
    expect(text).toContain("| `S` | integer, 1 to 2 | `1` | a \\| b (shared) |");
  });

  it("makes GitHub's anchor of a heading", () => {
    expect(headingAnchor("NATS: a three-node cluster in production")).toBe(
      "nats-a-three-node-cluster-in-production",
    );
    expect(headingAnchor("The run page's JSON API")).toBe("the-run-pages-json-api");
    expect(headingAnchor("`WorkerService` (internal)")).toBe("workerservice-internal");
  });
});
