/**
 * HubSpot's CRM object types the sandbox serves, and the properties each one has. Names are the
 * object types of the CRM v3 objects API (`/crm/v3/objects/{objectType}`) and the internal property
 * names of HubSpot's default properties (knowledge.hubspot.com, "HubSpot's default ... properties";
 * the engagements' `hs_` names from the engagement guides of developers.hubspot.com).
 */
export const OBJECT_TYPES = [
  "companies",
  "contacts",
  "deals",
  "notes",
  "emails",
  "calls",
  "tasks",
  "meetings",
] as const;
export type ObjectType = (typeof OBJECT_TYPES)[number];

export const ENGAGEMENT_TYPES = ["notes", "emails", "calls", "tasks", "meetings"] as const;
export type EngagementType = (typeof ENGAGEMENT_TYPES)[number];

export const isObjectType = (value: string): value is ObjectType =>
  (OBJECT_TYPES as readonly string[]).includes(value);

export const isEngagement = (type: ObjectType): type is EngagementType =>
  (ENGAGEMENT_TYPES as readonly string[]).includes(type);

/** A property's definition as `GET /crm/v3/properties/{objectType}` describes it (the `Property` model). */
export interface PropertySpec {
  name: string;
  label: string;
  type: "string" | "number" | "datetime" | "enumeration";
  fieldType: "text" | "textarea" | "number" | "date" | "select" | "html" | "phonenumber";
  groupName: string;
  options?: readonly string[];
  /** HubSpot maintains the value: not writable, and not for an import to map. */
  readOnly?: boolean;
}

const text = (name: string, label: string, groupName: string): PropertySpec => ({
  name,
  label,
  type: "string",
  fieldType: "text",
  groupName,
});
const time = (name: string, label: string, groupName: string, readOnly = true): PropertySpec => ({
  name,
  label,
  type: "datetime",
  fieldType: "date",
  groupName,
  readOnly,
});
const choice = (name: string, label: string, groupName: string, options: string[]): PropertySpec => ({
  name,
  label,
  type: "enumeration",
  fieldType: "select",
  groupName,
  options,
});
const objectId: PropertySpec = {
  name: "hs_object_id",
  label: "Record ID",
  type: "number",
  fieldType: "number",
  groupName: "",
  readOnly: true,
};

/** `lastmodifieddate` on contacts, `hs_lastmodifieddate` on every other type (HubSpot's default properties). */
export const modifiedProperty = (type: ObjectType): string =>
  type === "contacts" ? "lastmodifieddate" : "hs_lastmodifieddate";

/** `createdate` on companies, contacts and deals; engagements carry `hs_createdate`. */
export const createdProperty = (type: ObjectType): string =>
  isEngagement(type) ? "hs_createdate" : "createdate";

const engagementBase = (group: string): PropertySpec[] => [
  objectId,
  time("hs_createdate", "Created at", group),
  time("hs_lastmodifieddate", "Last modified date", group),
  time("hs_timestamp", "Activity date", group, false),
];

/** HubSpot's own properties the sandbox fills, per object type. */
export const STANDARD_PROPERTIES: Readonly<Record<ObjectType, readonly PropertySpec[]>> = {
  companies: [
    objectId,
    time("createdate", "Create Date", "companyinformation"),
    time("hs_lastmodifieddate", "Last Modified Date", "companyinformation"),
    text("name", "Company name", "companyinformation"),
    text("domain", "Company Domain Name", "companyinformation"),
    text("city", "City", "companyinformation"),
    { ...text("phone", "Phone Number", "companyinformation"), fieldType: "phonenumber" },
    choice("industry", "Industry", "companyinformation", [
      "COMPUTER_SOFTWARE",
      "RETAIL",
      "FINANCIAL_SERVICES",
    ]),
  ],
  contacts: [
    objectId,
    time("createdate", "Create Date", "contactinformation"),
    time("lastmodifieddate", "Last Modified Date", "contactinformation"),
    time("hs_lastmodifieddate", "Object last modified date/time", "contactinformation"),
    text("firstname", "First Name", "contactinformation"),
    text("lastname", "Last Name", "contactinformation"),
    text("email", "Email", "contactinformation"),
    { ...text("phone", "Phone Number", "contactinformation"), fieldType: "phonenumber" },
    text("jobtitle", "Job Title", "contactinformation"),
    choice("lifecyclestage", "Lifecycle Stage", "contactinformation", [
      "subscriber",
      "lead",
      "marketingqualifiedlead",
      "salesqualifiedlead",
      "opportunity",
      "customer",
      "evangelist",
      "other",
    ]),
  ],
  deals: [
    objectId,
    time("createdate", "Create Date", "dealinformation"),
    time("hs_lastmodifieddate", "Last Modified Date", "dealinformation"),
    text("dealname", "Deal Name", "dealinformation"),
    { ...text("amount", "Amount", "dealinformation"), type: "number", fieldType: "number" },
    time("closedate", "Close Date", "dealinformation", false),
    choice("pipeline", "Pipeline", "dealinformation", ["default"]),
    choice("dealstage", "Deal Stage", "dealinformation", ["appointmentscheduled", "closedwon", "closedlost"]),
  ],
  notes: [...engagementBase("note"), { ...text("hs_note_body", "Note body", "note"), fieldType: "html" }],
  emails: [
    ...engagementBase("email"),
    text("hs_email_subject", "Email subject", "email"),
    { ...text("hs_email_text", "Email body", "email"), fieldType: "textarea" },
    choice("hs_email_direction", "Email direction", "email", ["EMAIL", "INCOMING_EMAIL", "FORWARDED_EMAIL"]),
  ],
  calls: [
    ...engagementBase("call"),
    text("hs_call_title", "Call Title", "call"),
    { ...text("hs_call_body", "Call notes", "call"), fieldType: "html" },
    { ...text("hs_call_duration", "Call duration", "call"), type: "number", fieldType: "number" },
  ],
  tasks: [
    ...engagementBase("task"),
    text("hs_task_subject", "Task Title", "task"),
    { ...text("hs_task_body", "Notes", "task"), fieldType: "html" },
    choice("hs_task_status", "Task Status", "task", ["NOT_STARTED", "IN_PROGRESS", "COMPLETED"]),
  ],
  meetings: [
    ...engagementBase("meeting"),
    text("hs_meeting_title", "Meeting name", "meeting"),
    { ...text("hs_meeting_body", "Meeting description", "meeting"), fieldType: "html" },
    time("hs_meeting_start_time", "Start Time", "meeting", false),
    time("hs_meeting_end_time", "End Time", "meeting", false),
  ],
};

/** Properties the list and batch endpoints return when none are named (CRM objects API, "Properties returned by default"). */
export const DEFAULT_PROPERTIES: Readonly<Record<ObjectType, readonly string[]>> = {
  companies: ["name", "domain"],
  contacts: ["firstname", "lastname", "email"],
  deals: ["dealname", "amount", "closedate", "pipeline", "dealstage"],
  notes: [],
  emails: [],
  calls: [],
  tasks: [],
  meetings: [],
};

/** Properties every answer carries whatever was named: the record id and its two timestamps. */
export const ALWAYS_PROPERTIES = (type: ObjectType): string[] => [
  createdProperty(type),
  modifiedProperty(type),
  "hs_object_id",
];

export const customPropertyName = (n: number): string => `drover_custom_${String(n).padStart(2, "0")}`;

export function customProperties(count: number): PropertySpec[] {
  return Array.from({ length: count }, (_, i) => ({
    ...text(customPropertyName(i + 1), `Drover custom ${i + 1}`, "drover_custom"),
  }));
}
