import { PermanentError } from "@drover/provider-sdk";
import type { HubSpotClient } from "./client.js";
import type { ObjectType } from "./object-types.js";

/**
 * The properties of an object type as `GET /crm/v3/properties/{type}` lists them: HubSpot's own
 * (`hubspotDefined: true`) and the account's custom ones (no `hubspotDefined`, a `createdUserId`).
 * A list names its properties explicitly: without `properties`, HubSpot answers only a handful of
 * defaults, and an import would silently lose every other field.
 */
export interface TypeProperties {
  /** Every property's name, HubSpot's first, in the order listed. */
  names: string[];
  /** The custom ones: kept apart in the product's `custom_fields`, as Pipedrive's custom fields are. */
  custom: Set<string>;
}

interface PropertyList {
  results?: { name?: unknown; hubspotDefined?: unknown }[];
}

const NAME = /^[A-Za-z0-9_.-]{1,200}$/;

export async function readProperties(
  client: HubSpotClient,
  type: ObjectType,
  signal?: AbortSignal,
): Promise<TypeProperties> {
  const body = await client.get<PropertyList>(`/crm/v3/properties/${type}`, {}, "get", signal);
  if (!Array.isArray(body?.results))
    throw new PermanentError(`/crm/v3/properties/${type}: the answer lists no properties`);
  const standard: string[] = [];
  const custom: string[] = [];
  for (const p of body.results) {
    // A name that is not one HubSpot could have given is left out rather than sent back in a URL.
    if (typeof p?.name !== "string" || !NAME.test(p.name)) continue;
    (p.hubspotDefined === true ? standard : custom).push(p.name);
  }
  return { names: [...standard, ...custom], custom: new Set(custom) };
}

/**
 * `names` cut into batches whose `properties=` parameter, URL-encoded (a comma is `%2C`), fits in
 * `room` characters: every batch but the last as full as it can be, so a page costs as few
 * requests as the URL limit allows. A batch that does not fit one name is a defect of the limit.
 */
export function propertyBatches(names: readonly string[], room: number): string[][] {
  const batches: string[][] = [];
  let batch: string[] = [];
  let used = 0;
  for (const name of names) {
    if (batch.length > 0 && used + 3 + encodeURIComponent(name).length > room) {
      batches.push(batch);
      batch = [];
      used = 0;
    }
    if (encodeURIComponent(name).length > room)
      throw new PermanentError(`property ${name} alone is longer than a request URL allows`);
    used += encodeURIComponent(name).length + (batch.length > 0 ? 3 : 0);
    batch.push(name);
  }
  if (batch.length > 0) batches.push(batch);
  return batches;
}
