import { Rng } from "./prng.js";
import { formatDate } from "./time-format.js";
import { CITIES, STREETS } from "./words.js";

/**
 * The account's custom fields, and how each version of the API shows their values.
 *
 * Pipedrive names a custom field by a 40-hex key that differs per account. v1 puts a field at the
 * root of the record and spreads the field types with several parts over companion keys: a monetary
 * field is `<key>` plus `<key>_currency`, a date or time range `<key>` plus `<key>_until` (a time
 * range also `<key>_timezone_id`), an address `<key>` plus `<key>_street_number`, `_route`, ...,
 * `_formatted_address`. v2 gathers them under `custom_fields`, one value per key: a monetary field
 * as `{value, currency}`, a date range as `{value, until}`, a time range as
 * `{value, until, timezone_name}`, an address as an object of its parts (the v2 migration guide).
 * Leads inherit the deals' fields and, unlike the other v1 kinds, leave a field that has no value
 * out of the record altogether.
 */
export type FieldType = "varchar" | "monetary" | "daterange" | "timerange" | "address";

export interface CustomField {
  key: string;
  name: string;
  type: FieldType;
  /** Share of records that have a value. */
  rate: number;
}

/** The kinds that carry custom fields (leads carry the deals'). */
export type FieldKind = "organizations" | "persons" | "deals";

/** v1's address companions, in the order the API lists them. */
export const ADDRESS_PARTS = [
  "subpremise",
  "street_number",
  "route",
  "sublocality",
  "locality",
  "admin_area_level_1",
  "admin_area_level_2",
  "country",
  "postal_code",
  "formatted_address",
] as const;

/** v2's standard address objects (an organization's `address`): `OrganizationItemAddress`'s keys. */
export const V2_ADDRESS_KEYS = [
  "value",
  "country",
  "admin_area_level_1",
  "admin_area_level_2",
  "locality",
  "sublocality",
  "route",
  "street_number",
  "subpremise",
  "postal_code",
] as const;

/** An address custom field in v2: its value and every part v1 spreads over companions. */
const V2_CUSTOM_ADDRESS_KEYS = ["value", ...ADDRESS_PARTS] as const;

/** Time zones a time range is kept in: v1 names one by id, v2 by name. */
const TIME_ZONES: readonly (readonly [number, string])[] = [
  [151, "Europe/London"],
  [166, "Europe/Tallinn"],
  [159, "Europe/Lisbon"],
  [103, "America/Chicago"],
  [122, "America/Toronto"],
];

const COUNTRY: Record<string, string> = {
  Berlin: "Germany",
  Tallinn: "Estonia",
  Lisbon: "Portugal",
  Dublin: "Ireland",
  Austin: "United States",
  Toronto: "Canada",
  Madrid: "Spain",
  Warsaw: "Poland",
  Oslo: "Norway",
  Lyon: "France",
  Porto: "Portugal",
};

type Obj = Record<string, unknown>;

export class CustomFields {
  readonly byKind: Record<FieldKind, CustomField[]>;

  constructor(
    private readonly seed: number,
    industryKey: string,
  ) {
    const key = (name: string) => new Rng(seed, `fields/${name}`, 0).hex(40);
    this.byKind = {
      organizations: [
        { key: industryKey, name: "Industry", type: "varchar", rate: 0.8 },
        { key: key("headquarters"), name: "Headquarters", type: "address", rate: 0.4 },
      ],
      persons: [{ key: key("lifetime-value"), name: "Lifetime value", type: "monetary", rate: 0.3 }],
      deals: [
        { key: key("contract-value"), name: "Contract value", type: "monetary", rate: 0.35 },
        { key: key("contract-period"), name: "Contract period", type: "daterange", rate: 0.25 },
        { key: key("call-window"), name: "Call window", type: "timerange", rate: 0.15 },
        { key: key("delivery-address"), name: "Delivery address", type: "address", rate: 0.2 },
      ],
    };
  }

  /**
   * The record's custom fields as v1 root keys, companions included. Unset fields are null on every
   * key, or left out entirely (`omitUnset`, as v1 leads do).
   */
  v1Keys(kind: FieldKind, stream: string, id: number, omitUnset: boolean): Obj {
    const out: Obj = {};
    for (const field of this.byKind[kind]) {
      const rng = new Rng(this.seed, `${stream}/cf/${field.key}`, id);
      const set = rng.chance(field.rate);
      if (!set && omitUnset) continue;
      const k = field.key;
      switch (field.type) {
        case "varchar":
          out[k] = set ? rng.pick(["Retail", "Manufacturing", "Software", "Logistics", "Healthcare"]) : null;
          break;
        case "monetary":
          out[k] = set ? rng.int(1, 400) * 50 : null;
          out[`${k}_currency`] = set ? rng.pick(["EUR", "USD", "GBP"]) : null;
          break;
        case "daterange": {
          const from = Date.UTC(2025, 0, 1) + rng.int(0, 500) * 86_400_000;
          out[k] = set ? formatDate(from) : null;
          out[`${k}_until`] = set ? formatDate(from + rng.int(30, 720) * 86_400_000) : null;
          break;
        }
        case "timerange": {
          const hour = rng.int(7, 15);
          out[k] = set ? `${String(hour).padStart(2, "0")}:00:00` : null;
          out[`${k}_until`] = set ? `${String(hour + rng.int(1, 3)).padStart(2, "0")}:30:00` : null;
          out[`${k}_timezone_id`] = set ? (rng.pick(TIME_ZONES)[0] as number) : null;
          break;
        }
        case "address": {
          const number = String(rng.int(1, 250));
          const route = rng.pick(STREETS);
          const city = rng.pick(CITIES);
          const postal = String(rng.int(10000, 99999));
          const country = COUNTRY[city] ?? "Germany";
          const parts: Record<(typeof ADDRESS_PARTS)[number], string | null> = {
            subpremise: null,
            street_number: number,
            route,
            sublocality: null,
            locality: city,
            admin_area_level_1: null,
            admin_area_level_2: null,
            country,
            postal_code: postal,
            formatted_address: `${route} ${number}, ${postal} ${city}, ${country}`,
          };
          out[k] = set ? `${number} ${route}, ${city}` : null;
          for (const part of ADDRESS_PARTS) out[`${k}_${part}`] = set ? parts[part] : null;
          break;
        }
      }
    }
    return out;
  }

  /**
   * v2's `custom_fields` of a record, built from its v1 root keys so both versions always agree:
   * every field of the kind, null when it has no value.
   */
  v2Object(kind: FieldKind, v1: Obj): Obj {
    const out: Obj = {};
    for (const field of this.byKind[kind]) {
      const k = field.key;
      const value = v1[k];
      if (value === null || value === undefined) {
        out[k] = null;
        continue;
      }
      switch (field.type) {
        case "varchar":
          out[k] = value;
          break;
        case "monetary":
          out[k] = { value, currency: v1[`${k}_currency`] ?? null };
          break;
        case "daterange":
          out[k] = { value, until: v1[`${k}_until`] ?? null };
          break;
        case "timerange": {
          const zone = TIME_ZONES.find(([id]) => id === v1[`${k}_timezone_id`]);
          out[k] = { value, until: v1[`${k}_until`] ?? null, timezone_name: zone?.[1] ?? null };
          break;
        }
        case "address": {
          const address: Obj = {};
          for (const part of V2_CUSTOM_ADDRESS_KEYS)
            address[part] = part === "value" ? value : (v1[`${k}_${part}`] ?? null);
          out[k] = address;
          break;
        }
      }
    }
    return out;
  }

  /** Every root key a custom field of the kind may take in v1, for telling them from standard keys. */
  isV1Key(kind: FieldKind, key: string): boolean {
    return this.byKind[kind].some((f) => key === f.key || key.startsWith(`${f.key}_`));
  }
}
