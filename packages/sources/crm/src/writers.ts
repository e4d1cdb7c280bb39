import { productWriters } from "@drover/product-records";
import { PIPEDRIVE_PARENTS } from "./records.js";

/**
 * The product writers (@drover/product-records) with Pipedrive's kind names for the parents
 * (PIPEDRIVE_PARENTS).
 */
const writers = productWriters(PIPEDRIVE_PARENTS);

export const { companyKind, dealKind, leadKind, activityKind, noteKind, emailKind, personBatch } = writers;
export { type IndependentKind, independentBatch, NOT_LINKED } from "@drover/product-records";
