import type { RunFacts } from "@drover/provider-sdk";
import type { HubSpotClient } from "./client.js";
import { listBatches } from "./list-pages.js";
import type { ObjectType } from "./object-types.js";
import { readProperties } from "./properties.js";

/**
 * The properties a run reads of a type, decided once for the whole run: the first task of the type
 * reads the properties API and settles them as a run fact (`hubspot.properties.<type>`); every
 * other task, a retry or a resume among them, reads the fact. So every page of the run asks the
 * same batches, and a property an admin adds mid-run does not give half a list a column the other
 * half lacks.
 */
export interface RunProperties {
  /** The names in the batches a list page asks (each under the URL limit). */
  batches: string[][];
  /** The custom ones (not `hubspotDefined`): the product's custom fields. */
  custom: string[];
}

export const propertiesFact = (type: ObjectType) => `hubspot.properties.${type}`;

export async function runProperties(
  ctx: RunFacts & { signal?: AbortSignal },
  client: HubSpotClient,
  type: ObjectType,
): Promise<{ batches: string[][]; names: string[]; custom: ReadonlySet<string> }> {
  let fact = (await ctx.runFact(propertiesFact(type))) as RunProperties | undefined;
  if (!fact) {
    const read = await readProperties(client, type, ctx.signal);
    const mine: RunProperties = { batches: listBatches(client, type, read.names), custom: [...read.custom] };
    // Another task of the type may have settled it first: the value that stands is used.
    fact = (await ctx.settleRunFact(propertiesFact(type), mine)) as RunProperties;
  }
  return { batches: fact.batches, names: fact.batches.flat(), custom: new Set(fact.custom) };
}
