import type { CallType } from "@drover/provider-sdk";

/**
 * What each read Drover makes of Pipedrive costs against the company's daily token budget: the
 * `x-token-cost` Pipedrive publishes on each operation of its OpenAPI files (pipedrive-v1-openapi.yml,
 * pipedrive-v2-openapi.yml; see docs/token-budget.md). A v2 list costs half a v1 list for the same
 * 500 rows, and a row by id a twentieth of a list: the engine's plans (which list, how many rows per
 * request, `ids` batches) are weighed in these units, never in requests.
 *
 * `{id}` stands for one path segment. Literal paths come before the templates that would also
 * match them (`/api/v2/deals/archived` is not a deal by id).
 */
export const ENDPOINT_COSTS: Readonly<Record<string, number>> = {
  "/api/v2/deals/archived": 20,
  "/api/v2/deals": 10,
  "/api/v2/persons": 10,
  "/api/v2/organizations": 10,
  "/api/v2/activities": 10,
  "/api/v2/deals/{id}": 1,
  "/api/v2/persons/{id}": 1,
  "/api/v2/organizations/{id}": 1,
  "/api/v2/activities/{id}": 1,
  "/v1/leads/archived": 40,
  "/v1/leads": 20,
  "/v1/notes": 20,
  "/v1/leads/{id}": 2,
  "/v1/notes/{id}": 2,
  "/v1/deals/{id}/mailMessages": 20,
  "/v1/mailbox/mailMessages/{id}": 2,
  "/v1/organizationFields": 20,
};

/** A path outside the table (none the crm provider sends): priced as the dearest call of its type. */
const UNLISTED: Readonly<Record<CallType, number>> = { list: 20, get: 2, update: 10, search: 40 };

const templates = Object.entries(ENDPOINT_COSTS).map(([template, tokens]) => ({
  segments: template.split("/"),
  tokens,
}));

/** The endpoint `path` is a request of (its template in ENDPOINT_COSTS), or undefined. */
export function endpointOf(path: string): string | undefined {
  const segments = path.split("?")[0]!.replace(/\/+$/, "").split("/");
  const found = templates.find(
    (t) =>
      t.segments.length === segments.length &&
      t.segments.every((s, i) => (s === "{id}" ? segments[i] !== "" : s === segments[i])),
  );
  return found?.segments.join("/");
}

/** Tokens one request of `path` costs (its query does not change the price). */
export function tokenCost(type: CallType, path: string): number {
  const endpoint = endpointOf(path);
  return endpoint === undefined ? UNLISTED[type] : ENDPOINT_COSTS[endpoint]!;
}
