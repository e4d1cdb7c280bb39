/**
 * The product side of a CRM source, whatever the source: the records a source's rows are parsed
 * into, the writers that put them into the product tables (batched, matched by email, ownership on
 * a second pass), and the map a revert undoes. A source may not import another source
 * (test/layout/source-packages.test.ts): the crm (Pipedrive) and hubspot sources both write through
 * this package, each naming its own parent kinds (ParentKinds).
 */
export { applyToHeld } from "./ownership.js";
export { PRODUCT_RECORDS } from "./product-records.js";
export {
  type Activity,
  type Company,
  type Deal,
  deletion,
  type Email,
  isLinked,
  type Lead,
  linkedIds,
  type Note,
  type ParentKinds,
  type Parents,
  type Person,
  parentRefsOf,
} from "./records.js";
export { sharedRecords, unfilled } from "./shared-records.js";
export {
  type IndependentKind,
  independentBatch,
  NOT_LINKED,
  type ProductWriters,
  personBatch,
  productWriters,
  writeIndependent,
  writePerson,
} from "./writers.js";
