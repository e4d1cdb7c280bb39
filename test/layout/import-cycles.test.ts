import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/**
 * No module of the product imports itself back, through any chain of relative imports (types
 * included): a circle is two concepts that cannot be read apart. Package boundaries are already
 * one-way (turbo's build graph); this holds inside each package.
 */
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

function sourceFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) {
        if (name !== "gen" && name !== "node_modules") walk(path);
      } else if (/\.(ts|js)$/.test(name) && !name.endsWith(".d.ts")) out.push(path);
    }
  };
  for (const group of ["packages", "packages/sources", "services"])
    for (const pkg of readdirSync(join(ROOT, group))) {
      for (const dir of ["src", "static"]) {
        const path = join(ROOT, group, pkg, dir);
        if (existsSync(path)) walk(path);
      }
    }
  return out;
}

const IMPORT = /(?:import|export)\s[^'"]*?from\s+['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/g;

function importGraph(files: readonly string[]): Map<string, string[]> {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const deps: string[] = [];
    for (const m of readFileSync(file, "utf8").matchAll(IMPORT)) {
      const target = normalize(join(dirname(file), m[1] ?? m[2]!));
      const hit = [target, target.replace(/\.js$/, ".ts"), `${target}.ts`, join(target, "index.ts")].find(
        (c) => known.has(c),
      );
      if (hit) deps.push(hit);
    }
    graph.set(file, deps);
  }
  return graph;
}

/** Tarjan's strongly connected components: each of more than one module is a circle. */
function circles(graph: ReadonlyMap<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || graph.get(v)?.includes(v)) found.push(component);
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

describe("the source tree's imports", () => {
  it("form no circle inside a package", () => {
    const files = sourceFiles();
    expect(files.length).toBeGreaterThan(100);
    const found = circles(importGraph(files)).map((c) => c.map((f) => relative(ROOT, f)).sort());
    expect(found).toEqual([]);
  });

  it("would see a circle if there were one", () => {
    const graph = new Map([
      ["a", ["b"]],
      ["b", ["c"]],
      ["c", ["a"]],
      ["d", ["a"]],
    ]);
    expect(circles(graph).map((c) => c.sort())).toEqual([["a", "b", "c"]]);
  });
});
