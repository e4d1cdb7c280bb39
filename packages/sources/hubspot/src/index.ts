/**
 * The `hubspot` source: HubSpot CRM v3, read through its public API (issue 35). This is its read
 * layer: the client on the SDK's source client (errors classified once, the account's limits read
 * from `X-HubSpot-RateLimit-*` and a 429's policy, searches on their own pace), lists by cursor,
 * properties in batches under the URL limit, catch-up by modification date in windows that never
 * reach the search cap, batch reads by id with their partial answers, and v4 associations. The
 * provider (`hubspotProvider`, registered as "hubspot") seeds a chain of list tasks per type and a
 * catch-up, and writes the product's tables through @drover/product-records (README).
 */
export {
  ASSOCIATION_PAIRS,
  ASSOCIATIONS_BATCH_MAX,
  type Association,
  readAssociations,
} from "./associations.js";
export { BATCH_READ_MAX, type BatchMiss, type BatchRead, readByIds } from "./batch-read.js";
export { CATCH_UP, type CatchUpCursor, INDEXING_MARGIN_MS } from "./catch-up.js";
export {
  HubSpotClient,
  type HubSpotClientOptions,
  MAX_URL_LENGTH,
  SEARCHES_PER_SECOND,
} from "./client.js";
export {
  DEFAULT_SETTINGS,
  dailyResetTimeZone,
  type HubSpotSettings,
  parseSettings,
  SETTING_KEYS,
} from "./config.js";
export {
  LIST_PAGE_MAX,
  type ListCursor,
  type ListPage,
  listBatches,
  readListPage,
  readWholeList,
} from "./list-pages.js";
export { type ListCursor as ListWalkCursor, listPageKey } from "./list-walk.js";
export {
  type ChangePage,
  type ChangeWindow,
  changedRecords,
  SEARCH_CAP,
  SEARCH_PAGE_MAX,
} from "./modified-search.js";
export {
  ENGAGEMENT_TYPES,
  type EngagementType,
  isObjectType,
  modifiedProperty,
  OBJECT_TYPES,
  type ObjectType,
} from "./object-types.js";
export { pageLinks, pageRows, parentTypesOf } from "./page-rows.js";
export {
  HUBSPOT_PARENTS,
  keptParent,
  type ProductRow,
  productRow,
  type RecordLinks,
} from "./product-rows.js";
export { propertyBatches, readProperties, type TypeProperties } from "./properties.js";
export { hubspotProvider } from "./provider.js";
export { type HubSpotLimitOptions, hubspotAdapter, type Policy, refusalPolicy } from "./rate-limits.js";
export { customFieldsOf, type HubSpotRecord, parseRecord, parseRows, type ReadRow } from "./records.js";
export { hubspotRedrive } from "./redrive.js";
export { clientFor } from "./run-client.js";
export { propertiesFact, type RunProperties, runProperties } from "./run-properties.js";
export { estimateHubSpotWork } from "./work-estimate.js";
