import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import * as connection from "@drover/db/connection";
import * as product from "@drover/db/product";
import { describe, expect, it } from "vitest";

/**
 * A source is a package of its own under packages/sources/ that reaches the engine only through the
 * provider contract: the capabilities its contexts carry (docs/sources.md). It never holds a handle
 * on the engine's tables, so a second source cannot be written against the first one's shortcuts.
 * What is checked, file by file of each source package's src:
 * - no `drover.<name>` anywhere (the engine's schema in SQL, raw or through drizzle), no quoted
 *   "drover" (`sql.identifier("drover")`, `pgSchema("drover")`), and no engine table through a
 *   transaction's relational queries (`tx.query.runs`: the Tx type knows the whole schema);
 * - imports of workspace packages only from the contract's list: the SDK, the product writers
 *   (@drover/product-records, source-neutral), the database's connection and product-schema entry
 *   points, telemetry. Not `@drover/db` itself (it re-exports
 *   the engine's schema), nor the engine, the ledger, the registry or another source;
 * - no relative import out of the package;
 * and of each package.json: no runtime dependency on the engine or the ledger (tests may use them).
 * The product writers every source shares (packages/product-records) are held to the same rules.
 * The two entry points a source may use must not carry an engine table either.
 */
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const SOURCES = join(ROOT, "packages/sources");

const ALLOWED_WORKSPACE_IMPORTS = new Set([
  "@drover/provider-sdk",
  "@drover/product-records",
  "@drover/db/connection",
  "@drover/db/product",
  "@drover/telemetry",
]);

const ENGINE_SCHEMA = /\bdrover\s*\.\s*"?[a-z_]+|["'`]drover["'`]/gi;
const SPECIFIER = /(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;

const PRODUCT_RECORDS = join(ROOT, "packages/product-records");

function sourcePackages(): string[] {
  return readdirSync(SOURCES)
    .map((name) => join(SOURCES, name))
    .filter((dir) => existsSync(join(dir, "package.json")));
}

/** The source packages and the product writers they share: what may not reach the engine. */
function checkedPackages(): string[] {
  return [...sourcePackages(), PRODUCT_RECORDS];
}

function tsFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...tsFiles(path));
    else if (name.endsWith(".ts")) out.push(path);
  }
  return out;
}

const ENGINE_TABLES = [
  ...readFileSync(join(ROOT, "packages/db/src/schema/engine.ts"), "utf8").matchAll(/export const (\w+)/g),
].map((m) => m[1]!);

/** What one source file does that a source may not, each as `file: what`. */
function violations(file: string, text: string, packageDir: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(ENGINE_SCHEMA)) out.push(`${file}: names the engine's schema (${m[0]})`);
  for (const m of text.matchAll(/\.query\.(\w+)/g))
    if (ENGINE_TABLES.includes(m[1]!)) out.push(`${file}: queries the engine's ${m[1]} table`);
  for (const m of text.matchAll(SPECIFIER)) {
    const spec = m[1] ?? m[2]!;
    if (spec.startsWith("@drover/") && !ALLOWED_WORKSPACE_IMPORTS.has(spec))
      out.push(`${file}: imports ${spec}`);
    if (spec.startsWith(".") && relative(packageDir, join(file, "..", spec)).startsWith(".."))
      out.push(`${file}: imports ${spec}, outside its package`);
  }
  return out;
}

describe("source packages", () => {
  const packages = sourcePackages();

  it("are the crm and pg-table sources at least, each with its own src", () => {
    const names = packages.map((dir) => JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).name);
    expect(names).toEqual(expect.arrayContaining(["@drover/source-crm", "@drover/source-pg-table"]));
    for (const dir of packages) expect(tsFiles(join(dir, "src")).length).toBeGreaterThan(0);
  });

  it("neither name the engine's schema nor import it, the engine or each other (nor do the product writers)", () => {
    const found: string[] = [];
    let files = 0;
    for (const dir of checkedPackages()) {
      for (const file of tsFiles(join(dir, "src"))) {
        files++;
        found.push(...violations(relative(ROOT, file), readFileSync(file, "utf8"), relative(ROOT, dir)));
      }
    }
    expect(files).toBeGreaterThan(20);
    expect(found).toEqual([]);
  });

  it("depend on neither the engine nor the ledger at run time", () => {
    for (const dir of checkedPackages()) {
      const deps = Object.keys(
        JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).dependencies ?? {},
      );
      expect(
        deps.filter((d) => ["@drover/engine", "@drover/ledger", "@drover/source-registry"].includes(d)),
      ).toEqual([]);
    }
  });

  it("can use no engine table through the database entry points they may import", () => {
    expect(ENGINE_TABLES).toEqual(expect.arrayContaining(["runs", "tasks", "ledger", "notes"]));
    const reachable = [...Object.keys(connection), ...Object.keys(product)];
    expect(reachable.filter((name) => ENGINE_TABLES.includes(name))).toEqual([]);
  });

  it("would be caught writing drover.* or importing the engine's schema (the check can fail)", () => {
    const dir = "packages/sources/x";
    const bad = [
      "await tx.execute(sql`insert into drover.notes (run_id) values ($1)`);",
      'const t = sql`select 1 from "drover"."ledger"`;',
      'import { runs } from "@drover/db";',
      "const [run] = await tx.query.runs.findMany();",
      'import { ledgerLookup } from "@drover/engine";',
      'import { crmProvider } from "@drover/source-crm";',
      'import { x } from "../../crm/src/provider.js";',
    ];
    for (const line of bad) expect(violations(`${dir}/src/a.ts`, line, dir), line).not.toEqual([]);
    const good = 'import type { Tx } from "@drover/db/connection";\nconst name = `drover run ` + id;';
    expect(violations(`${dir}/src/a.ts`, good, dir)).toEqual([]);
  });
});
