import type { Queryable } from "@drover/db";
import { sql } from "drizzle-orm";

/**
 * A tenant's product tables compared by content, "new ids aside": each row without its own id,
 * its timestamps and the product's random message key, and each link to another record replaced
 * by that record's content (itself without ids and links). Two imports of one account, or an
 * import and a model of the account, compare equal table by table whatever ids they were given.
 */
export const PRODUCT_TABLES = [
  "companies",
  "contacts",
  "deals",
  "leads",
  "activities",
  "notes",
  "emails",
] as const;
export type ProductTable = (typeof PRODUCT_TABLES)[number];

/** The links of each table: column → the table it names. */
const LINKS: Record<ProductTable, Record<string, ProductTable>> = {
  companies: {},
  contacts: { company_id: "companies" },
  deals: { contact_id: "contacts", company_id: "companies" },
  leads: { contact_id: "contacts", company_id: "companies" },
  activities: { deal_id: "deals", contact_id: "contacts", company_id: "companies", lead_id: "leads" },
  notes: { deal_id: "deals", contact_id: "contacts", company_id: "companies", lead_id: "leads" },
  emails: { deal_id: "deals" },
};

const IGNORED = ["id", "tenant_id", "created_at", "updated_at", "message_key"];

/** `to_jsonb(alias)` without ids, timestamps and links: a record's own content. */
function ownContent(table: ProductTable, alias: string, live: boolean) {
  const drop = [...IGNORED, ...(live ? ["deleted_at"] : []), ...Object.keys(LINKS[table])]
    .map((c) => ` - '${c}'`)
    .join("");
  return sql.raw(`(to_jsonb(${alias})${drop})`);
}

/**
 * Kinds a clean import skips when none of their parents exists (crm writers' NOT_LINKED): in live
 * content such a row counts only while one of its parents lives.
 */
const NEEDS_A_PARENT: readonly ProductTable[] = ["activities", "notes", "emails"];

function linkedToLive(table: ProductTable) {
  if (!NEEDS_A_PARENT.includes(table)) return sql``;
  const alive = Object.entries(LINKS[table]).map(
    ([column, parent]) =>
      sql`exists (select 1 from ${sql.raw(`app.${parent}`)} l where l.id = t.${sql.identifier(column)} and l.deleted_at is null)`,
  );
  return sql`and (${sql.join(alive, sql` or `)})`;
}

/** A record the source deleted (a follow pass marked it so): in `live` content it is as if absent. */
const gone = (alias: string) => sql.raw(`${alias}.deleted_at is not null`);

/**
 * Every row of each product table of the tenant as sorted JSON text, links by the linked record's
 * content. `live`: only the records the source still has, what one clean import of the source as
 * it is now gives (a follow run keeps a deleted record, marked deleted; a clean import never sees it).
 */
export async function productContent(
  q: Queryable,
  tenantId: string,
  options: { live?: boolean } = {},
): Promise<Record<ProductTable, string[]>> {
  const live = options.live ?? false;
  const out = {} as Record<ProductTable, string[]>;
  for (const table of PRODUCT_TABLES) {
    const links = Object.entries(LINKS[table]).map(([column, parent], i) => {
      const p = `p${i}`;
      return sql`|| jsonb_build_object(${column}::text, (select ${ownContent(parent, p, live)} from ${sql.raw(
        `app.${parent}`,
      )} ${sql.raw(p)} where ${sql.raw(p)}.id = t.${sql.identifier(column)} ${live ? sql`and not ${gone(p)}` : sql``}))`;
    });
    const rows = await q.execute<{ row: string }>(sql`
      select (${ownContent(table, "t", live)} ${sql.join(links, sql` `)})::text as row
        from ${sql.raw(`app.${table}`)} t where t.tenant_id = ${tenantId}
         ${live ? sql`and not ${gone("t")} ${linkedToLive(table)}` : sql``}`);
    out[table] = rows.map((r) => r.row).sort();
  }
  return out;
}
