/**
 * What each endpoint the sandbox serves charges against the daily budget: Pipedrive's published
 * `x-token-cost` per operation (pipedrive-v1-openapi.yml and pipedrive-v2-openapi.yml, the
 * OpenAPI files its API reference publishes). The crm provider keeps its own table
 * (packages/sources/crm/src/token-costs.ts): the contract test holds both to the published costs,
 * so neither can drift alone. The v1 lists of deals, persons, organizations and activities left the
 * spec with their retirement: they keep the price v1 lists had (20 a page, 2 a row by id).
 */
export const ENDPOINT_COSTS: Readonly<Record<string, number>> = {
  "/api/v2/deals": 10,
  "/api/v2/persons": 10,
  "/api/v2/organizations": 10,
  "/api/v2/activities": 10,
  "/api/v2/deals/archived": 20,
  "/api/v2/deals/{id}": 1,
  "/api/v2/persons/{id}": 1,
  "/api/v2/organizations/{id}": 1,
  "/api/v2/activities/{id}": 1,
  "/v1/leads": 20,
  "/v1/leads/archived": 40,
  "/v1/leads/{id}": 2,
  "/v1/notes": 20,
  "/v1/notes/{id}": 2,
  "/v1/deals/{id}/mailMessages": 20,
  "/v1/mailbox/mailMessages/{id}": 2,
  "/v1/organizationFields": 20,
  "/v1/deals": 20,
  "/v1/persons": 20,
  "/v1/organizations": 20,
  "/v1/activities": 20,
  "/v1/deals/{id}": 2,
  "/v1/persons/{id}": 2,
  "/v1/organizations/{id}": 2,
  "/v1/activities/{id}": 2,
};

/** Tokens a request of `endpoint` (a key of ENDPOINT_COSTS) costs; 0 for a path the API does not know. */
export function endpointCost(endpoint: string | null): number {
  return endpoint === null ? 0 : (ENDPOINT_COSTS[endpoint] ?? 0);
}
