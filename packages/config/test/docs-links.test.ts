import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../scripts/config-docs.js";
import { headingAnchor } from "../src/config-reference.js";

/** The documents whose links must resolve: the README, docs/ and the bench's findings. */
function documents(): string[] {
  const docs = readdirSync(join(REPO_ROOT, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => join(REPO_ROOT, "docs", name));
  return [join(REPO_ROOT, "README.md"), ...docs, join(REPO_ROOT, "test/bench/FINDINGS.md")];
}

/** A document's text with fenced blocks and code spans blanked, so only real links remain. */
function prose(text: string): string {
  return text.replace(/^```[\s\S]*?^```/gm, "").replace(/`[^`\n]*`/g, "");
}

/** The anchors a Markdown file offers: GitHub's for each heading, numbered when repeated. */
function anchorsOf(file: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of readFileSync(file, "utf8")
    .replace(/^```[\s\S]*?^```/gm, "")
    .split("\n")) {
    const heading = /^#{1,6}\s+(.*)$/.exec(line);
    if (!heading) continue;
    const base = headingAnchor(heading[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Every relative link and anchor of one document that does not resolve, as "file: target". */
function brokenLinks(file: string): string[] {
  const broken: string[] = [];
  for (const match of prose(readFileSync(file, "utf8")).matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = match[1]!;
    if (/^[a-z]+:/i.test(target)) continue; // https:, mailto:
    const [path, anchor] = target.split("#", 2) as [string, string | undefined];
    const resolved = path === "" ? file : resolve(dirname(file), decodeURI(path));
    const where = `${relative(REPO_ROOT, file)}: ${target}`;
    if (!existsSync(resolved)) {
      broken.push(`${where} (no such file)`);
      continue;
    }
    if (anchor === undefined || statSync(resolved).isDirectory()) continue;
    if (!resolved.endsWith(".md")) continue;
    if (!anchorsOf(resolved).has(anchor)) broken.push(`${where} (no such heading)`);
  }
  return broken;
}

describe("the README's and docs/' links", () => {
  it("each point at a file that exists and, with an anchor, at a heading it has", () => {
    const files = documents();
    expect(files.length).toBeGreaterThan(8);
    expect(files.flatMap(brokenLinks)).toEqual([]);
  });

  it("reports a link to a missing file or heading, and not one inside code", () => {
    const dir = mkdtempSync(join(tmpdir(), "drover-links-"));
    writeFileSync(join(dir, "other.md"), "# Other\n\n## A section's title\n");
    const doc = join(dir, "doc.md");
    writeFileSync(
      doc,
      [
        "# Doc",
        "[ok](other.md#a-sections-title) [self](#doc) [web](https://example.com/x.md)",
        "[gone](missing.md) [no heading](other.md#nope) [no own heading](#nope)",
        "`[code](missing-too.md)`",
        "```",
        "[fenced](missing-three.md)",
        "```",
      ].join("\n"),
    );
    try {
      expect(brokenLinks(doc).map((b) => b.slice(b.indexOf(": ") + 2))).toEqual([
        "missing.md (no such file)",
        "other.md#nope (no such heading)",
        "#nope (no such heading)",
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
