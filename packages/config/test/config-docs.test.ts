import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CONFIG_DOCS_PATH, OTHER_SETTINGS, REPO_ROOT, renderConfigDocs } from "../scripts/config-docs.js";

/** Every `.ts` file under the src folders of packages/* and services/*, generated code aside. */
function sourceFiles(): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== "gen" && entry.name !== "node_modules") walk(path);
      } else if (entry.name.endsWith(".ts")) files.push(path);
    }
  };
  for (const group of ["packages", "services"])
    for (const pkg of readdirSync(join(REPO_ROOT, group))) {
      const src = join(REPO_ROOT, group, pkg, "src");
      try {
        walk(src);
      } catch {
        // a package without src/
      }
    }
  return files;
}

describe("docs/configuration.md", () => {
  it("is what the config schemas render (run pnpm docs:config when this fails)", () => {
    const committed = readFileSync(join(REPO_ROOT, CONFIG_DOCS_PATH), "utf8");
    expect(committed, `${CONFIG_DOCS_PATH} is stale: run pnpm docs:config and commit the result`).toBe(
      renderConfigDocs(),
    );
  });

  it("names every variable a service or package reads from its environment", () => {
    const reference = renderConfigDocs();
    const read = new Set<string>();
    for (const file of sourceFiles()) {
      const text = readFileSync(file, "utf8");
      for (const m of text.matchAll(/\benv\.([A-Z][A-Z0-9_]+)|\bread\(env, "([A-Z][A-Z0-9_]+)"/g))
        read.add(m[1] ?? m[2]!);
    }
    expect(read.size).toBeGreaterThan(10);
    const missing = [...read].filter((name) => !reference.includes(`| \`${name}\` |`));
    expect(
      missing,
      "variables read but not in the reference: add them to a schema or to OTHER_SETTINGS",
    ).toEqual([]);
  });

  it("declares each variable read outside the schemas where it is still read", () => {
    const stale = OTHER_SETTINGS.flatMap((setting) =>
      setting.readIn
        .filter((file) => !readFileSync(join(REPO_ROOT, file), "utf8").includes(setting.name))
        .map((file) => `${setting.name} is no longer read in ${file}`),
    );
    expect(stale).toEqual([]);
  });
});
