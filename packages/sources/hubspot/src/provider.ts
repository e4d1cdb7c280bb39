import { PRODUCT_RECORDS } from "@drover/product-records";
import {
  PermanentError,
  type Provider,
  type SeedContext,
  type TaskContext,
  type TaskSeed,
} from "@drover/provider-sdk";
import { CATCH_UP, catchUp, catchUpSeed, isCatchUpCursor } from "./catch-up.js";
import { dailyResetTimeZone, parseSettings, validateBaseUrl } from "./config.js";
import { FIRST_PAGE, listPageKey, walkList } from "./list-walk.js";
import { ENGAGEMENT_TYPES, isObjectType } from "./object-types.js";
import { hubspotRedrive, isRedriveCursor, redriveRows } from "./redrive.js";
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
  phases: [["companies"], ["contacts"], ["deals"], [...ENGAGEMENT_TYPES], [CATCH_UP]],
  closingKinds: [CATCH_UP],
  // A contact whose company is not in the destination keeps the company's id as a reference, and
  // the barrier says so (a company that failed, or a run without companies).
  deferredLinks: [{ kind: "contacts", ref: "companies", table: "app.contacts", column: "company_id" }],
  redrive: hubspotRedrive,
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
      seeds.push({ kind, seedKey: listPageKey(kind, FIRST_PAGE), cursor: { ...FIRST_PAGE } });
    }
    return seeds;
  },

  async runTask(ctx: TaskContext) {
    const type = ctx.task.kind;
    if (!isObjectType(type)) throw new PermanentError(`the hubspot source has no kind "${type}"`);
    if (isCatchUpCursor(ctx.task.cursor)) return catchUp(ctx, type);
    if (isRedriveCursor(ctx.task.cursor)) return redriveRows(ctx, type);
    return walkList(ctx, type);
  },
};
