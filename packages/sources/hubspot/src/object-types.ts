/**
 * HubSpot's CRM object types the source reads, each at `/crm/v3/objects/{type}`, and the names of
 * their modification dates. HubSpot spells a contact's modification date `lastmodifieddate`; the
 * other objects' `hs_lastmodifieddate`. A contacts search filtered on `hs_lastmodifieddate` is
 * accepted and silently matches nothing (amp-labs/connectors#45, after the HubSpot community thread
 * "CRM V3 API Search issue with Contacts when using Filters"): a catch-up that used the wrong name
 * would read no contact and say nothing.
 */
export const ENGAGEMENT_TYPES = ["notes", "emails", "calls", "tasks", "meetings"] as const;
export const OBJECT_TYPES = ["companies", "contacts", "deals", ...ENGAGEMENT_TYPES] as const;

export type EngagementType = (typeof ENGAGEMENT_TYPES)[number];
export type ObjectType = (typeof OBJECT_TYPES)[number];

export function isObjectType(value: string): value is ObjectType {
  return (OBJECT_TYPES as readonly string[]).includes(value);
}

/** The property a search filters and sorts on to find what changed. */
export function modifiedProperty(type: ObjectType): string {
  return type === "contacts" ? "lastmodifieddate" : "hs_lastmodifieddate";
}
