import { type Dataset, unit } from "./dataset.js";
import { type Answer, badRequest } from "./errors.js";
import { customProperties, type ObjectType, type PropertySpec, STANDARD_PROPERTIES } from "./object-types.js";

/** When the account's properties were defined: before any generated record. */
const DEFINED_AT = "2025-06-01T09:00:00.000Z";

/**
 * A property as `GET /crm/v3/properties/{objectType}` lists it (the `Property` model): HubSpot's own
 * say `hubspotDefined: true`; a custom one names the user who created and last changed it instead.
 */
function describe(spec: PropertySpec, order: number, custom: boolean): Record<string, unknown> {
  return {
    updatedAt: DEFINED_AT,
    createdAt: DEFINED_AT,
    name: spec.name,
    label: spec.label,
    type: spec.type,
    fieldType: spec.fieldType,
    description: "",
    groupName: spec.groupName,
    options: (spec.options ?? []).map((value, i) => ({
      label: value,
      value,
      displayOrder: i,
      hidden: false,
    })),
    displayOrder: order,
    calculated: false,
    externalOptions: false,
    hasUniqueValue: spec.name === "hs_object_id",
    hidden: false,
    modificationMetadata: {
      archivable: custom,
      readOnlyDefinition: !custom,
      readOnlyValue: spec.readOnly === true,
    },
    formField: !spec.readOnly,
    ...(custom ? { createdUserId: "1000001", updatedUserId: "1000001" } : { hubspotDefined: true }),
  };
}

/** `GET /crm/v3/properties/{objectType}`: every property, HubSpot's and the account's custom ones (`CollectionResponsePropertyNoPaging`). */
export function propertiesOf(dataset: Dataset, type: ObjectType): Answer {
  const standard = STANDARD_PROPERTIES[type].map((p, i) => describe(p, i, false));
  const custom = customProperties(dataset.opts.customProperties).map((p, i) => describe(p, i, true));
  return { status: 200, body: { results: [...standard, ...custom] } };
}

/**
 * HubSpot-defined association type ids between the pairs the sandbox links (association type ID
 * table of the v4 associations guide, developers.hubspot.com/docs/api/crm/associations/associations-v4):
 * [from → to, to → from].
 */
const TYPE_IDS: Readonly<Record<string, readonly [number, number]>> = {
  "contacts:companies": [279, 280],
  "deals:contacts": [3, 4],
  "deals:companies": [341, 342],
  "notes:contacts": [202, 201],
  "notes:companies": [190, 189],
  "notes:deals": [214, 213],
  "emails:contacts": [198, 197],
  "emails:companies": [186, 185],
  "emails:deals": [210, 209],
  "calls:contacts": [194, 193],
  "calls:companies": [182, 181],
  "calls:deals": [206, 205],
  "tasks:contacts": [204, 203],
  "tasks:companies": [192, 191],
  "tasks:deals": [216, 215],
  "meetings:contacts": [200, 199],
  "meetings:companies": [188, 187],
  "meetings:deals": [212, 211],
};

/**
 * A contact's or deal's company is most often its primary one: HubSpot then lists the link under
 * two types, the unlabelled one and then "Primary" (contact → company 1, company → contact 2, deal →
 * company 5, company → deal 6: the v4 guide's type id table; the order as a recorded batch read
 * shows it). About three links in ten are not primary and carry the unlabelled type alone.
 */
const PRIMARY_IDS: Readonly<Record<string, readonly [number, number]>> = {
  "contacts:companies": [1, 2],
  "deals:companies": [5, 6],
};

function associationTypes(
  dataset: Dataset,
  key: string,
  forward: boolean,
  child: number,
): Record<string, unknown>[] {
  const plain = TYPE_IDS[key] as readonly [number, number];
  const primary = PRIMARY_IDS[key];
  const side = forward ? 0 : 1;
  const isPrimary = primary !== undefined && unit(dataset.opts.seed, `${key}.primary`, child) < 0.7;
  return [
    { category: "HUBSPOT_DEFINED", typeId: plain[side], label: null },
    ...(isPrimary ? [{ category: "HUBSPOT_DEFINED", typeId: primary[side], label: "Primary" }] : []),
  ];
}

/** The child's parent of `to`'s type, by position (the dataset's links point from child to parent). */
function parentOf(dataset: Dataset, child: ObjectType, parent: ObjectType, index: number): number | null {
  if (parent === "companies") return dataset.companyOf(child, index);
  if (parent === "contacts") return dataset.contactOf(child, index);
  if (parent === "deals") return dataset.dealOf(child, index);
  return null;
}

/** The pairs the sandbox links, child type first: `contacts:companies`, `notes:deals`, … */
export const LINKED_PAIRS: readonly (readonly [ObjectType, ObjectType])[] = Object.keys(TYPE_IDS).map(
  (key) => key.split(":") as [ObjectType, ObjectType],
);

/** Every link of a pair as [child id, parent id]: what a perfect import of associations finds. */
export function links(dataset: Dataset, child: ObjectType, parent: ObjectType): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 1; i <= dataset.count(child); i++) {
    const p = parentOf(dataset, child, parent, i);
    if (p !== null) out.push([dataset.idOf(child, i), dataset.idOf(parent, p)]);
  }
  return out;
}

/** Per dataset: children of each parent by position, for a pair and the number of rounds it was built at. */
const childIndexes = new WeakMap<Dataset, Map<string, { rounds: number; byParent: Map<number, number[]> }>>();

/**
 * Every child of `child`'s type linked to parent `index`: one walk over the children per pair, kept
 * until a round of changes adds records.
 */
function childrenOf(dataset: Dataset, child: ObjectType, parent: ObjectType, index: number): number[] {
  let indexes = childIndexes.get(dataset);
  if (!indexes) {
    indexes = new Map();
    childIndexes.set(dataset, indexes);
  }
  const key = `${child}:${parent}`;
  let built = indexes.get(key);
  if (!built || built.rounds !== dataset.changeRounds) {
    const byParent = new Map<number, number[]>();
    for (let i = 1; i <= dataset.count(child); i++) {
      const p = parentOf(dataset, child, parent, i);
      if (p === null) continue;
      const list = byParent.get(p) ?? [];
      list.push(i);
      byParent.set(p, list);
    }
    built = { rounds: dataset.changeRounds, byParent };
    indexes.set(key, built);
  }
  return built.byParent.get(index) ?? [];
}

/**
 * `POST /crm/v4/associations/{fromObjectType}/{toObjectType}/batch/read`: for each input id its
 * associated records (`BatchResponsePublicAssociationMultiWithLabel`); an id with none is left out.
 */
export function associations(dataset: Dataset, from: ObjectType, to: ObjectType, body: unknown): Answer {
  const forward = TYPE_IDS[`${from}:${to}`];
  const backward = TYPE_IDS[`${to}:${from}`];
  if (!forward && !backward) return badRequest(`the sandbox links no ${from} to ${to}`);
  const inputs = (body as { inputs?: { id?: unknown }[] } | null)?.inputs;
  if (!Array.isArray(inputs)) return badRequest("inputs is required");
  if (inputs.length > 1000) return badRequest("at most 1000 inputs may be read at once");
  const startedAt = new Date().toISOString();
  const results: Record<string, unknown>[] = [];
  for (const input of inputs) {
    const id = String(input.id);
    const index = dataset.indexOf(from, id);
    if (index === null) continue;
    const linked = forward
      ? [parentOf(dataset, from, to, index)].filter((i): i is number => i !== null && i <= dataset.count(to))
      : childrenOf(dataset, to, from, index);
    if (linked.length === 0) continue;
    const key = forward ? `${from}:${to}` : `${to}:${from}`;
    results.push({
      from: { id },
      // A string, as the client model (`MultiAssociatedObjectWithLabel.toObjectId: string`) and a
      // recorded batch read have it; the v4 guide's examples print a number.
      to: linked.map((i) => ({
        toObjectId: dataset.idOf(to, i),
        associationTypes: associationTypes(dataset, key, forward !== undefined, forward ? index : i),
      })),
    });
  }
  return {
    status: 200,
    body: { status: "COMPLETE", results, startedAt, completedAt: new Date().toISOString() },
  };
}
