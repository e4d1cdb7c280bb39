import type { CallsLeft, EstimateContext, WorkEstimate } from "@drover/provider-sdk";
import { CATCH_UP } from "./catch-up.js";
import type { ListCursor } from "./list-walk.js";
import { isObjectType, type ObjectType } from "./object-types.js";
import { parentTypesOf } from "./page-rows.js";
import { propertiesFact, type RunProperties } from "./run-properties.js";

/**
 * What a live hubspot run still needs from HubSpot, as a floor: HubSpot's lists do not say how long
 * they are, so each chain still walking (a type's live list and its archived list are two) needs
 * at least its current page; a type whose phase has not begun, its properties and both lists'
 * first pages. A page costs one request per property batch (the run fact, once known) and one
 * per parent type its associations are read from; HubSpot counts every request as one unit of the
 * day. The catch-up's searches are not counted (what changed is not known before it searches).
 */
export async function estimateHubSpotWork(ctx: EstimateContext): Promise<WorkEstimate> {
  const kinds: CallsLeft[] = [];
  const seeded = new Set(ctx.tasks.map((t) => t.kind));
  for (const kind of ctx.run.plan.flat()) {
    if (kind === CATCH_UP || !isObjectType(kind)) continue;
    const perPage = (await batchesOf(ctx, kind)) + parentTypesOf(kind).length;
    let pages = 0;
    if (!seeded.has(kind)) pages = 2;
    for (const t of ctx.tasks) {
      if (t.kind !== kind || t.status === "succeeded") continue;
      const c = t.cursor as unknown as Partial<ListCursor>;
      if (typeof c.archived !== "boolean") continue;
      pages += t.n;
    }
    const requests = pages * perPage + (seeded.has(kind) ? 0 : 1);
    kinds.push({ kind, requests, tokens: requests, atLeast: true });
  }
  return { kinds };
}

/** The property batches a page of the type asks: the run's fact, or one before it is settled. */
async function batchesOf(ctx: EstimateContext, type: ObjectType): Promise<number> {
  const fact = (await ctx.runFact(propertiesFact(type))) as RunProperties | undefined;
  return Math.max(1, fact?.batches.length ?? 1);
}
