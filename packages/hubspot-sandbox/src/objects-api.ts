import type { CrmRecord, Dataset, RecordFacts } from "./dataset.js";
import { type Answer, badRequest } from "./errors.js";
import {
  ALWAYS_PROPERTIES,
  customProperties,
  DEFAULT_PROPERTIES,
  modifiedProperty,
  type ObjectType,
  STANDARD_PROPERTIES,
} from "./object-types.js";

/** `limit` of a list: default 10, at most 100 (CRM objects API, `GET /crm/v3/objects/{objectType}`). */
export const LIST_MAX = 100;
/** `limit` of a search: default 10, at most 200 (changelog "Increasing our API limits", 2024). */
export const SEARCH_MAX = 200;
/** "The search endpoints are limited to 10,000 total results for any given query" (search guide, Limitations). */
export const SEARCH_CAP = 10_000;
/** Inputs of a batch read: at most 100. */
export const BATCH_MAX = 100;

const iso = (ms: number) => new Date(ms).toISOString();

const known = new WeakMap<Dataset, Map<ObjectType, Set<string>>>();

/** Names a type knows: its standard properties and the account's custom ones (built once per type). */
export function knownProperties(dataset: Dataset, type: ObjectType): Set<string> {
  let byType = known.get(dataset);
  if (!byType) {
    byType = new Map();
    known.set(dataset, byType);
  }
  let names = byType.get(type);
  if (!names) {
    names = new Set([
      ...STANDARD_PROPERTIES[type].map((p) => p.name),
      ...customProperties(dataset.opts.customProperties).map((p) => p.name),
    ]);
    byType.set(type, names);
  }
  return names;
}

/**
 * The properties an answer carries: those named (a name the type does not know is left out, as the
 * API does), or the type's defaults when none is named, and always the id and the two timestamps.
 */
function pick(dataset: Dataset, record: CrmRecord, named: readonly string[]): Record<string, string | null> {
  const names = knownProperties(dataset, record.type);
  const wanted = named.length > 0 ? named.filter((n) => names.has(n)) : DEFAULT_PROPERTIES[record.type];
  const out: Record<string, string | null> = {};
  for (const name of [...wanted, ...ALWAYS_PROPERTIES(record.type)])
    out[name] = record.properties[name] ?? null;
  return out;
}

/** A record as `SimplePublicObject`: `archivedAt` only on an archived one. */
export function render(
  dataset: Dataset,
  record: CrmRecord,
  named: readonly string[],
): Record<string, unknown> {
  return {
    id: record.id,
    properties: pick(dataset, record, named),
    createdAt: iso(record.createdMs),
    updatedAt: iso(record.updatedMs),
    archived: record.archived,
    ...(record.archived ? { archivedAt: iso(record.archivedMs as number) } : {}),
  };
}

/** `properties=a,b` and `properties=a&properties=b` both name properties. */
export const namedProperties = (query: URLSearchParams): string[] =>
  query.getAll("properties").flatMap((v) => v.split(",").filter((n) => n.length > 0));

function limitOf(raw: string | number | null | undefined, max: number): number | Answer {
  if (raw === null || raw === undefined || raw === "") return 10;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > max)
    return badRequest(`limit must be an integer between 1 and ${max}`);
  return n;
}

/**
 * `GET /crm/v3/objects/{objectType}`: records in id order from the one after `after` (the last
 * id served), live ones or with `archived=true` archived ones, and `paging.next` while more remain.
 */
export function list(dataset: Dataset, type: ObjectType, query: URLSearchParams, baseUrl: string): Answer {
  const limit = limitOf(query.get("limit"), LIST_MAX);
  if (typeof limit !== "number") return limit;
  const archived = query.get("archived") === "true";
  const after = query.get("after");
  let index = 1;
  if (after !== null) {
    const at = dataset.indexOf(type, after);
    if (at === null && !/^[0-9]+$/.test(after)) return badRequest(`after must be a record id, got ${after}`);
    index = (at ?? Number.MAX_SAFE_INTEGER) + 1;
  }
  const named = namedProperties(query);
  const results: Record<string, unknown>[] = [];
  const count = dataset.count(type);
  let last: CrmRecord | null = null;
  for (; index <= count && results.length < limit; index++) {
    const facts = dataset.facts(type, index);
    if (facts.archived !== archived) continue;
    const record = dataset.complete(facts);
    results.push(render(dataset, record, named));
    last = record;
  }
  while (index <= count && dataset.facts(type, index).archived !== archived) index++;
  if (index > count || last === null) return { status: 200, body: { results } };
  const next = new URLSearchParams(query);
  next.set("after", last.id);
  const link = `${baseUrl}/crm/v3/objects/${type}?${next.toString()}`;
  return { status: 200, body: { results, paging: { next: { after: last.id, link } } } };
}

/** The object type's name in a batch read's error message: "Could not get some CONTACT objects". */
const SINGULAR: Readonly<Record<ObjectType, string>> = {
  companies: "COMPANY",
  contacts: "CONTACT",
  deals: "DEAL",
  notes: "NOTE",
  emails: "EMAIL",
  calls: "CALL",
  tasks: "TASK",
  meetings: "MEETING",
};

/**
 * `POST /crm/v3/objects/{objectType}/batch/read`: the named ids' records, as a
 * `BatchResponseSimplePublicObject`; when some ids name no record, a 207 whose body adds `numErrors`
 * and one OBJECT_NOT_FOUND error listing them (`BatchResponseSimplePublicObjectWithErrors`).
 */
export function batchRead(dataset: Dataset, type: ObjectType, body: unknown, query: URLSearchParams): Answer {
  const input = body as { inputs?: { id?: unknown }[]; properties?: unknown } | null;
  if (!input || !Array.isArray(input.inputs)) return badRequest("inputs is required");
  if (input.inputs.length > BATCH_MAX) return badRequest(`at most ${BATCH_MAX} inputs may be read at once`);
  const named = Array.isArray(input.properties) ? input.properties.map(String) : [];
  const archived = query.get("archived") === "true";
  const startedAt = new Date().toISOString();
  const results: Record<string, unknown>[] = [];
  const missing: string[] = [];
  for (const { id } of input.inputs) {
    const index = dataset.indexOf(type, String(id));
    const record = index === null ? null : dataset.record(type, index);
    if (record !== null && record.archived === archived) results.push(render(dataset, record, named));
    else missing.push(String(id));
  }
  const times = { startedAt, completedAt: new Date().toISOString() };
  if (missing.length === 0) return { status: 200, body: { status: "COMPLETE", results, ...times } };
  const error = {
    status: "error",
    category: "OBJECT_NOT_FOUND",
    message: `Could not get some ${SINGULAR[type]} objects, they may be deleted or not exist. Check that ids are valid.`,
    context: { ids: missing },
  };
  return { status: 207, body: { status: "COMPLETE", results, numErrors: 1, errors: [error], ...times } };
}

interface Filter {
  propertyName?: string;
  operator?: string;
  value?: string | number;
}

const OPERATORS: Record<string, (a: number, b: number) => boolean> = {
  EQ: (a, b) => a === b,
  NEQ: (a, b) => a !== b,
  GT: (a, b) => a > b,
  GTE: (a, b) => a >= b,
  LT: (a, b) => a < b,
  LTE: (a, b) => a <= b,
};

/** A filter on a date or an id: values are epoch milliseconds or ISO 8601, compared as numbers. */
function matcher(type: ObjectType, filter: Filter): ((r: RecordFacts) => boolean) | string {
  const op = OPERATORS[filter.operator ?? ""];
  if (!op) return `operator ${String(filter.operator)} is not supported by the sandbox`;
  const raw = filter.value;
  const value =
    typeof raw === "number" || /^[0-9]+$/.test(String(raw)) ? Number(raw) : Date.parse(String(raw));
  if (Number.isNaN(value)) return `${String(raw)} is not a valid value for ${String(filter.propertyName)}`;
  const name = filter.propertyName;
  if (name === "hs_object_id") return (r) => op(Number(r.id), value);
  // A contacts search filtered on hs_lastmodifieddate "silently fails to return objects according
  // to criteria": contacts are searched by lastmodifieddate (amp-labs/connectors#45, after the
  // HubSpot community thread "CRM V3 API Search issue with Contacts when using Filters"). Modelled
  // as a filter nothing passes.
  if (type === "contacts" && name === "hs_lastmodifieddate") return () => false;
  if (name === "hs_lastmodifieddate" || name === modifiedProperty(type)) return (r) => op(r.updatedMs, value);
  if (name === "createdate" || name === "hs_createdate") return (r) => op(r.createdMs, value);
  return `the sandbox filters on hs_lastmodifieddate, ${modifiedProperty(type)}, createdate and hs_object_id only`;
}

interface SearchRequest {
  filterGroups?: { filters?: Filter[] }[];
  sorts?: ({ propertyName?: string; direction?: string } | string)[];
  properties?: string[];
  limit?: number;
  after?: string | number;
}

function matches(type: ObjectType, request: SearchRequest): ((r: RecordFacts) => boolean) | Answer {
  const groups: ((r: RecordFacts) => boolean)[][] = [];
  for (const group of request.filterGroups ?? []) {
    const tests: ((r: RecordFacts) => boolean)[] = [];
    for (const filter of group.filters ?? []) {
      const m = matcher(type, filter);
      if (typeof m === "string") return badRequest(m);
      tests.push(m);
    }
    groups.push(tests);
  }
  // Groups are ORed, the filters of a group ANDed (search guide, "Filter search results").
  return (r) => groups.length === 0 || groups.some((g) => g.every((t) => t(r)));
}

function sorter(type: ObjectType, request: SearchRequest): (a: RecordFacts, b: RecordFacts) => number {
  const sort = request.sorts?.[0];
  const name = typeof sort === "string" ? sort : sort?.propertyName;
  const desc = typeof sort === "object" && sort?.direction === "DESCENDING" ? -1 : 1;
  const key = (r: RecordFacts) =>
    name === "hs_lastmodifieddate" || name === modifiedProperty(type)
      ? r.updatedMs
      : name === "createdate" || name === "hs_createdate"
        ? r.createdMs
        : Number(r.id);
  return (a, b) => desc * (key(a) - key(b) || Number(a.id) - Number(b.id));
}

/**
 * `POST /crm/v3/objects/{objectType}/search`: live records matching the filter groups, sorted, from
 * offset `after`; `total` counts every match. A page reaching past the 10,000th result is refused
 * with a 400 ("Attempting to page beyond 10,000 will result in a 400 error", search guide).
 */
export function search(dataset: Dataset, type: ObjectType, body: unknown): Answer {
  const request = (body ?? {}) as SearchRequest;
  const limit = limitOf(request.limit, SEARCH_MAX);
  if (typeof limit !== "number") return limit;
  const after = request.after === undefined || request.after === "" ? 0 : Number(request.after);
  if (!Number.isInteger(after) || after < 0) return badRequest(`after must be a non-negative offset`);
  if (after + limit > SEARCH_CAP)
    return badRequest(`Cannot page beyond ${SEARCH_CAP} results; narrow the search with filters`);
  const test = matches(type, request);
  if (typeof test !== "function") return test;
  const found = dataset.allFacts(type).filter((r) => !r.archived && test(r));
  found.sort(sorter(type, request));
  const named = Array.isArray(request.properties) ? request.properties.map(String) : [];
  const page = found.slice(after, after + limit);
  const results = page.map((r) => render(dataset, dataset.complete(r), named));
  const end = after + results.length;
  const paging = end < found.length ? { paging: { next: { after: String(end) } } } : {};
  return { status: 200, body: { total: found.length, results, ...paging } };
}
