import { TransientError } from "@drover/provider-sdk";
import type { HubSpotClient } from "./client.js";
import type { ObjectType } from "./object-types.js";

/**
 * The pairs a product import links, child first as the product keeps the link (a contact points at
 * its company, a deal at its contact and company, an engagement at the records it is about): read
 * from the child's side with the v4 associations API.
 */
export const ASSOCIATION_PAIRS: readonly (readonly [ObjectType, ObjectType])[] = [
  ["contacts", "companies"],
  ["deals", "contacts"],
  ["deals", "companies"],
  ...(["notes", "emails", "calls", "tasks", "meetings"] as const).flatMap((e) =>
    (["contacts", "companies", "deals"] as const).map((p) => [e, p] as const),
  ),
];

/** Inputs of one `POST /crm/v4/associations/{from}/{to}/batch/read`: at most 1,000 (v4 associations guide). */
export const ASSOCIATIONS_BATCH_MAX = 1_000;

/** One record's link to another, with HubSpot's association types (a label "Primary" marks the primary company). */
export interface Association {
  fromId: string;
  toId: string;
  typeIds: number[];
  primary: boolean;
}

interface AssociationAnswer {
  results?: {
    from?: { id?: unknown };
    to?: { toObjectId?: unknown; associationTypes?: { typeId?: unknown; label?: unknown }[] }[];
  }[];
}

const ID = /^[1-9]\d{0,19}$/;

/**
 * The `to` records each of `fromIds` is associated with. `toObjectId` is a string in HubSpot's client
 * model and in recorded answers, a number in the guide's examples: both are read. A record with no
 * association is left out of the answer (so it gets no entry). A link listed twice (the unlabelled
 * type, then "Primary") is one association with both type ids.
 */
export async function readAssociations(
  client: HubSpotClient,
  from: ObjectType,
  to: ObjectType,
  fromIds: readonly string[],
  signal?: AbortSignal,
): Promise<Map<string, Association[]>> {
  const out = new Map<string, Association[]>();
  const unique = [...new Set(fromIds)];
  for (let i = 0; i < unique.length; i += ASSOCIATIONS_BATCH_MAX) {
    const chunk = unique.slice(i, i + ASSOCIATIONS_BATCH_MAX);
    const path = `/crm/v4/associations/${from}/${to}/batch/read`;
    const answer = await client.post<AssociationAnswer>(
      path,
      { inputs: chunk.map((id) => ({ id })) },
      "get",
      signal,
    );
    if (!Array.isArray(answer?.results)) throw new TransientError(`${path}: the answer has no results`);
    for (const result of answer.results) {
      const fromId = String(result?.from?.id ?? "");
      if (!ID.test(fromId)) continue;
      const links = out.get(fromId) ?? [];
      for (const target of Array.isArray(result.to) ? result.to : []) {
        const toId = String(target?.toObjectId ?? "");
        if (!ID.test(toId)) continue;
        const types = Array.isArray(target.associationTypes) ? target.associationTypes : [];
        let link = links.find((l) => l.toId === toId);
        if (!link) {
          link = { fromId, toId, typeIds: [], primary: false };
          links.push(link);
        }
        for (const t of types) {
          if (typeof t?.typeId === "number" && !link.typeIds.includes(t.typeId)) link.typeIds.push(t.typeId);
          if (t?.label === "Primary") link.primary = true;
        }
      }
      out.set(fromId, links);
    }
  }
  return out;
}
