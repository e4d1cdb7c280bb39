import type { Dataset } from "./dataset.js";
import { OBJECT_TYPES, type ObjectType } from "./object-types.js";
import { LINKED_PAIRS, links } from "./schema-api.js";

/** The ids of a type a perfect import finds, live and archived apart, in id order. */
export function idsOf(dataset: Dataset, type: ObjectType): { live: string[]; archived: string[] } {
  const live: string[] = [];
  const archived: string[] = [];
  for (const r of dataset.allFacts(type)) (r.archived ? archived : live).push(r.id);
  return { live, archived };
}

/** What a perfect import of the account finds: every type's ids and every association. */
export interface Truth {
  types: Record<ObjectType, { live: string[]; archived: string[] }>;
  /** By `child:parent` (LINKED_PAIRS): [child id, parent id]. */
  links: Record<string, [string, string][]>;
}

export function truthOf(dataset: Dataset): Truth {
  const types = Object.fromEntries(OBJECT_TYPES.map((t) => [t, idsOf(dataset, t)])) as Truth["types"];
  const pairs = Object.fromEntries(
    LINKED_PAIRS.map(([child, parent]) => [`${child}:${parent}`, links(dataset, child, parent)]),
  );
  return { types, links: pairs };
}
