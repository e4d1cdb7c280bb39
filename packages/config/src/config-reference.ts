import { z } from "zod";

/**
 * The configuration reference (docs/configuration.md) is rendered from the services' schemas, so a
 * setting's type, default and description are written once, where it is parsed. A description is
 * the schema's `.describe()`; where the schema cannot say something it carries metadata:
 * `format` (the form a refinement checks, e.g. `host:port`) and `shownDefault` (a default computed
 * at start, or one a check outside the schema supplies, e.g. "required").
 */

/** One setting as the reference shows it. */
export interface SettingDoc {
  name: string;
  type: string;
  default: string;
  description: string;
}

/** A service and its schema, as the reference names it. */
export interface ServiceSettings {
  /** The heading, e.g. "Coordinator". */
  title: string;
  /** Where the schema lives, relative to the repository root. */
  source: string;
  /** What the section says before its table. */
  intro: string;
  schema: z.ZodObject;
}

/** A variable read outside any schema (telemetry, the CLI, the test harness), declared for the reference. */
export interface OtherSetting extends SettingDoc {
  readBy: string;
  /**
   * The files that read it, relative to the repository root (the reference's test checks they do);
   * empty for one a dependency reads itself.
   */
  readIn: readonly string[];
}

type Meta = { description?: unknown; format?: unknown; shownDefault?: unknown };

/** The schema's wrappers from the outside in: optional, default and a transform's input. */
function layers(schema: z.ZodType): z.ZodType[] {
  const found: z.ZodType[] = [schema];
  let current = schema;
  for (;;) {
    if (current instanceof z.ZodOptional || current instanceof z.ZodDefault)
      current = current.unwrap() as z.ZodType;
    else if (current instanceof z.ZodPipe) current = current.in as z.ZodType;
    else return found;
    found.push(current);
  }
}

function text(value: unknown): string | undefined {
  return typeof value === "string" && value.trim() !== "" ? value.trim() : undefined;
}

/** The first of the layers (outermost first) whose metadata says `key`. */
function metaOf(all: z.ZodType[], key: keyof Meta): string | undefined {
  for (const layer of all) {
    const value = text((z.globalRegistry.get(layer) as Meta | undefined)?.[key]);
    if (value !== undefined) return value;
  }
  return undefined;
}

function typeOf(name: string, all: z.ZodType[]): string {
  const format = metaOf(all, "format");
  if (format) return format;
  const base = all[all.length - 1];
  if (base instanceof z.ZodNumber) {
    const kind = base.isInt ? "integer" : "number";
    const { minValue: min, maxValue: max } = base;
    const bounded = (v: number | null): v is number =>
      v !== null && Number.isFinite(v) && Math.abs(v) < 2 ** 52;
    if (bounded(min) && bounded(max)) return `${kind}, ${min} to ${max}`;
    if (bounded(min)) return `${kind}, at least ${min}`;
    return kind;
  }
  if (base instanceof z.ZodEnum) return `one of ${base.options.map((o) => `\`${String(o)}\``).join(", ")}`;
  if (name.endsWith("_FILE")) return "file path";
  return "text";
}

function defaultOf(all: z.ZodType[]): string {
  const shown = metaOf(all, "shownDefault");
  if (shown) return shown;
  // An optional setting is absent when unset, whatever default its inner schema declares.
  if (all[0] instanceof z.ZodOptional) return "none";
  const withDefault = all.find((layer) => layer instanceof z.ZodDefault);
  if (withDefault) return `\`${String(withDefault.def.defaultValue)}\``;
  return "none";
}

/** Every setting of a schema, in the schema's order. */
export function settingDocs(schema: z.ZodObject): SettingDoc[] {
  return Object.entries(schema.shape).map(([name, field]) => {
    const all = layers(field as z.ZodType);
    return {
      name,
      type: typeOf(name, all),
      default: defaultOf(all),
      description: metaOf(all, "description") ?? "",
    };
  });
}

/** A table cell: one line, pipes escaped. */
function cell(value: string): string {
  return value.replace(/\s*\n\s*/g, " ").replace(/\|/g, "\\|");
}

function table(header: string[], rows: string[][]): string {
  const lines = [`| ${header.join(" | ")} |`, `| ${header.map(() => "---").join(" | ")} |`];
  for (const row of rows) lines.push(`| ${row.map(cell).join(" | ")} |`);
  return lines.join("\n");
}

/** GitHub's anchor of a heading. */
export function headingAnchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** The reference as Markdown: an index of every variable, then a table per service and the rest. */
export function renderConfigReference(input: {
  preamble: string;
  services: readonly ServiceSettings[];
  others: { title: string; intro: string; settings: readonly OtherSetting[] };
  shared: { names: readonly string[]; note: string };
}): string {
  const readers = new Map<string, string[]>();
  const note = (name: string, where: string) => readers.set(name, [...(readers.get(name) ?? []), where]);
  const sections: string[] = [];
  for (const service of input.services) {
    const docs = settingDocs(service.schema);
    for (const doc of docs)
      note(doc.name, `[${service.title.toLowerCase()}](#${headingAnchor(service.title)})`);
    sections.push(
      `## ${service.title}\n\n${service.intro} Schema: \`${service.source}\`.\n\n${table(
        ["variable", "type", "default", "description"],
        docs.map((d) => [
          `\`${d.name}\``,
          d.type,
          d.default,
          input.shared.names.includes(d.name)
            ? `${d.description} ${input.shared.note}`.trim()
            : d.description,
        ]),
      )}`,
    );
  }
  const othersAnchor = headingAnchor(input.others.title);
  for (const other of input.others.settings) note(other.name, `[${other.readBy}](#${othersAnchor})`);
  sections.push(
    `## ${input.others.title}\n\n${input.others.intro}\n\n${table(
      ["variable", "read by", "type", "default", "description"],
      input.others.settings.map((o) => [`\`${o.name}\``, o.readBy, o.type, o.default, o.description]),
    )}`,
  );
  const index = table(
    ["variable", "read by"],
    [...readers.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([name, where]) => [`\`${name}\``, [...new Set(where)].join(", ")]),
  );
  return `${input.preamble.trim()}\n\n## Every variable\n\n${index}\n\n${sections.join("\n\n")}\n`;
}
