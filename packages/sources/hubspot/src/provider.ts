import { PRODUCT_RECORDS } from "@drover/product-records";
import {
  isSweepCursor,
  PermanentError,
  type Provider,
  type SeedContext,
  type TaskContext,
  type TaskSeed,
} from "@drover/provider-sdk";
import { CATCH_UP, catchUp, catchUpSeed, isCatchUpCursor } from "./catch-up.js";
import { dailyResetTimeZone, parseSettings, validateBaseUrl } from "./config.js";
import { sweepDeletions } from "./deletion-sweep.js";
import { FIRST_ARCHIVED_PAGE, FIRST_PAGE, listPageKey, walkList } from "./list-walk.js";
import { ENGAGEMENT_TYPES, isObjectType } from "./object-types.js";
import { hubspotRedrive, isRedriveCursor, redriveRows } from "./redrive.js";
import { hubspotVerifier } from "./verifier.js";
import { estimateHubSpotWork } from "./work-estimate.js";

/**
 * The `hubspot` source's provider: HubSpot CRM v3 into the product's tables through the same
 * writers as the crm source (@drover/product-records). Parents first: companies, then the contacts
 * that point at them, then deals, then the engagements about any of those; the catch-up closes the
 * run with what changed while it read. Each type's list is one chain of tasks (live, then archived),
 * a page a step; design and mapping in the package's README.
 */
export const hubspotProvider: Provider = {
  name: "hubspot",
  // Companies, contacts and deals are read side by side: the window is only full when several
  // lists are walked at once (one list is one chain of pages, each waiting on the one before), and
  // their links to each other are made at the barrier (deferredLinks). Engagements need their deal
  // known when written (an email with a deal is an email, without one an activity).
  phases: [["companies", "contacts", "deals"], [...ENGAGEMENT_TYPES], [CATCH_UP]],
  closingKinds: [CATCH_UP],
  // A link whose parent is not in the destination at the barrier keeps the parent's id as a
  // reference, and the barrier says so (a parent that failed, or a run without its kind).
  deferredLinks: [
    { kind: "contacts", ref: "companies", table: "app.contacts", column: "company_id" },
    { kind: "deals", ref: "contacts", table: "app.deals", column: "contact_id" },
    { kind: "deals", ref: "companies", table: "app.deals", column: "company_id" },
  ],
  redrive: hubspotRedrive,
  verifier: hubspotVerifier,
  estimateWork: estimateHubSpotWork,
  dailyResetTimeZone,
  productRecords: PRODUCT_RECORDS,

  validateConfig({ baseUrl, apiToken, settings }) {
    const urlProblem = validateBaseUrl(baseUrl);
    if (urlProblem) return urlProblem;
    if (!apiToken.trim())
      return "api_token is required: a HubSpot private app's access token (or an OAuth access token) with the CRM read scopes";
    const parsed = parseSettings(settings);
    return typeof parsed === "string" ? parsed : undefined;
  },

  async seedPhase(ctx: SeedContext): Promise<TaskSeed[]> {
    const seeds: TaskSeed[] = [];
    for (const kind of ctx.kinds) {
      if (kind === CATCH_UP) {
        const seed = catchUpSeed(ctx.run, ctx.pass);
        if (seed) seeds.push(seed);
        continue;
      }
      if (!isObjectType(kind)) throw new PermanentError(`the hubspot source has no kind "${kind}"`);
      // The live list and the archived one are two chains, walked side by side.
      for (const first of [FIRST_PAGE, FIRST_ARCHIVED_PAGE])
        seeds.push({ kind, seedKey: listPageKey(kind, first), cursor: { ...first } });
    }
    return seeds;
  },

  async runTask(ctx: TaskContext) {
    const type = ctx.task.kind;
    if (!isObjectType(type)) throw new PermanentError(`the hubspot source has no kind "${type}"`);
    if (isSweepCursor(ctx.task.cursor)) return sweepDeletions(ctx, type);
    if (isCatchUpCursor(ctx.task.cursor)) return catchUp(ctx, type);
    if (isRedriveCursor(ctx.task.cursor)) return redriveRows(ctx, type);
    return walkList(ctx, type);
  },
};
