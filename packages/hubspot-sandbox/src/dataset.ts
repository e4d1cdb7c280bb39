import {
  createdProperty,
  customPropertyName,
  isEngagement,
  modifiedProperty,
  type ObjectType,
} from "./object-types.js";
import type { ResolvedOptions } from "./options.js";

/** Uniform in [0, 1), fixed for (seed, stream, index): row i is built without rows 0..i-1. */
export function unit(seed: number, stream: string, index: number): number {
  let h = (seed ^ 0x9e3779b9) >>> 0;
  for (let i = 0; i < stream.length; i++) h = Math.imul(h ^ stream.charCodeAt(i), 0x01000193);
  h = Math.imul(h ^ index, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) / 4294967296;
}

/** One record as the API describes it before properties are picked: `SimplePublicObject`'s facts. */
export interface CrmRecord {
  type: ObjectType;
  /** 1-based position in its type: creation order. */
  index: number;
  id: string;
  createdMs: number;
  updatedMs: number;
  archived: boolean;
  archivedMs: number | null;
  properties: Record<string, string | null>;
}

/** A record without its properties, and how many rounds of changes edited it. */
export type RecordFacts = Omit<CrmRecord, "properties"> & { edits: number };

/**
 * Record ids are numeric strings, one id space per type, as HubSpot's are; types start far apart so
 * an id given to the wrong type finds nothing.
 */
const ID_BASE: Readonly<Record<ObjectType, number>> = {
  companies: 4_000_000_000,
  contacts: 1_000_000_000,
  deals: 7_000_000_000,
  notes: 20_000_000_000,
  emails: 21_000_000_000,
  calls: 22_000_000_000,
  tasks: 23_000_000_000,
  meetings: 24_000_000_000,
};

/** Generated records are created over the year before this instant, oldest first. */
const HISTORY_END_MS = Date.UTC(2026, 10, 1);
const HISTORY_MS = 365 * 86_400_000;

const iso = (ms: number) => new Date(ms).toISOString();

/**
 * The account: a pure function of the options and the rounds of changes applied. Each round edits
 * `changeEdits` records of every type (spread evenly over the generated ones: a property changes and
 * the modification time moves to the round's), adds `changeAdds` records after the last and
 * archives `changeArchives` (or the round's own count) of the generated live ones; a round may
 * also restore some it archived.
 */
export class Dataset {
  private readonly rounds: number[] = [];
  /** How many records each round archives. */
  private readonly archives: number[] = [];
  /** How many records each round restores from the archive. */
  private readonly restores: number[] = [];
  private readonly archiveCache = new Map<
    ObjectType,
    { rounds: number; byIndex: Map<number, { archived: number; restored?: number }> }
  >();
  private readonly factsCache = new Map<ObjectType, { rounds: number; facts: RecordFacts[] }>();

  constructor(readonly opts: ResolvedOptions) {}

  /** Records generated before any change: the options' counts. */
  base(type: ObjectType): number {
    if (type === "companies") return this.opts.companies;
    if (type === "contacts") return this.opts.contacts;
    if (type === "deals") return this.opts.deals;
    return this.opts.engagements;
  }

  count(type: ObjectType): number {
    return this.base(type) + this.rounds.length * this.opts.changeAdds;
  }

  get changeRounds(): number {
    return this.rounds.length;
  }

  /** Applies a round of changes at `atMs` (never at or before the last round's time). */
  applyChanges(
    atMs: number,
    round: { archives?: number; restores?: number } = {},
  ): { round: number; at: string } {
    this.rounds.push(Math.max(atMs, (this.rounds.at(-1) ?? 0) + 1));
    this.archives.push(round.archives ?? this.opts.changeArchives);
    this.restores.push(round.restores ?? 0);
    return { round: this.rounds.length, at: iso(this.rounds.at(-1) as number) };
  }

  idOf(type: ObjectType, index: number): string {
    return String(ID_BASE[type] + index);
  }

  /** The 1-based position of an id in its type, or null when the account has no such record. */
  indexOf(type: ObjectType, id: string): number | null {
    if (!/^[0-9]+$/.test(id)) return null;
    const index = Number(id) - ID_BASE[type];
    return index >= 1 && index <= this.count(type) ? index : null;
  }

  /** How many rounds edited this record (0 for none): every round edits the same records again. */
  editRounds(type: ObjectType, index: number): number {
    const n = this.base(type);
    const e = Math.min(this.opts.changeEdits, n);
    if (e === 0 || index > n || this.rounds.length === 0) return 0;
    const i = Math.ceil(((index - 1) * e) / n);
    return i < e && 1 + Math.floor((i * n) / e) === index ? this.rounds.length : 0;
  }

  /**
   * The rounds (0-based) that archived this generated record and, if one did, restored it; or
   * undefined. Every third generated record from the last is a candidate, unless it is edited or
   * archived from the start; the rounds take the candidates in turn, as many as each archives, and
   * restore the earliest archived before them, as many as each restores. Worked out once per round
   * and type.
   */
  archiveRounds(type: ObjectType, index: number): { archived: number; restored?: number } | undefined {
    const wanted = this.archives.reduce((a, b) => a + b, 0);
    if (wanted === 0) return undefined;
    let cached = this.archiveCache.get(type);
    if (!cached || cached.rounds !== this.rounds.length) {
      const order: { index: number; archived: number; restored?: number }[] = [];
      const n = this.base(type);
      let round = 0;
      let taken = 0;
      for (let d = 0; d < n && order.length < wanted; d += 3) {
        const i = n - d;
        if (this.archivedFromStart(type, i) || this.editRounds(type, i) > 0) continue;
        while (taken + (this.archives[round] ?? 0) <= order.length) taken += this.archives[round++] ?? 0;
        order.push({ index: i, archived: round });
      }
      let next = 0;
      for (const [q, n] of this.restores.entries())
        for (let k = 0; k < n && next < order.length && order[next]!.archived < q; k++)
          order[next++]!.restored = q;
      cached = { rounds: this.rounds.length, byIndex: new Map(order.map((o) => [o.index, o])) };
      this.archiveCache.set(type, cached);
    }
    return cached.byIndex.get(index);
  }

  private archivedFromStart(type: ObjectType, index: number): boolean {
    return unit(this.opts.seed, `${type}.archived`, index) < this.opts.archivedRate;
  }

  /** The round (0-based) that added this record, or undefined for a generated one. */
  addedRound(type: ObjectType, index: number): number | undefined {
    const n = this.base(type);
    if (index <= n || this.opts.changeAdds === 0) return undefined;
    return Math.floor((index - n - 1) / this.opts.changeAdds);
  }

  /** A record's id, times and state without its properties: what filtering and sorting need. */
  facts(type: ObjectType, index: number): RecordFacts {
    const seed = this.opts.seed;
    const added = this.addedRound(type, index);
    const n = Math.max(1, this.base(type));
    const step = Math.min(60_000, Math.floor(HISTORY_MS / n));
    const createdMs =
      added === undefined
        ? HISTORY_END_MS - HISTORY_MS + index * step + Math.floor(unit(seed, `${type}.ms`, index) * 1000)
        : (this.rounds[added] as number);
    const edits = this.editRounds(type, index);
    const touched = Math.floor(unit(seed, `${type}.touched`, index) * 30 * 86_400_000);
    const updatedMs =
      edits > 0
        ? (this.rounds.at(-1) as number)
        : added !== undefined
          ? createdMs
          : Math.min(createdMs + touched, HISTORY_END_MS);
    // Archived records come from the generated ones only: a round's additions stay live.
    const generatedArchived = added === undefined && this.archivedFromStart(type, index);
    // Archiving at a round, or restoring, leaves the modification time where it was
    // (airbyte#19838): a search by it never finds either.
    const rounds = added === undefined ? this.archiveRounds(type, index) : undefined;
    const round = rounds && rounds.restored === undefined ? rounds.archived : undefined;
    const archived = generatedArchived || round !== undefined;
    const archivedMs = generatedArchived
      ? updatedMs + 3_600_000
      : round !== undefined
        ? (this.rounds[round] as number)
        : null;
    return { type, index, id: this.idOf(type, index), createdMs, updatedMs, archived, archivedMs, edits };
  }

  /**
   * Every record's facts of a type, in id order, built once per round of changes: a search filters
   * them instead of generating the whole type again for each request.
   */
  allFacts(type: ObjectType): readonly RecordFacts[] {
    const cached = this.factsCache.get(type);
    if (cached && cached.rounds === this.rounds.length) return cached.facts;
    const facts = Array.from({ length: this.count(type) }, (_, i) => this.facts(type, i + 1));
    this.factsCache.set(type, { rounds: this.rounds.length, facts });
    return facts;
  }

  record(type: ObjectType, index: number): CrmRecord {
    return this.complete(this.facts(type, index));
  }

  /** Adds its properties to a record's facts. */
  complete(facts: RecordFacts): CrmRecord {
    const { edits, ...rest } = facts;
    return {
      ...rest,
      properties: this.properties(facts.type, facts.index, facts.createdMs, facts.updatedMs, edits),
    };
  }

  private properties(
    type: ObjectType,
    index: number,
    createdMs: number,
    updatedMs: number,
    edits: number,
  ): Record<string, string | null> {
    const seed = this.opts.seed;
    const suffix = edits > 0 ? ` (edited ${edits})` : "";
    const p: Record<string, string | null> = {
      hs_object_id: this.idOf(type, index),
      [createdProperty(type)]: iso(createdMs),
      [modifiedProperty(type)]: iso(updatedMs),
      // Contacts have both; only `lastmodifieddate` is their default and searchable one.
      ...(type === "contacts" ? { hs_lastmodifieddate: iso(updatedMs) } : {}),
      ...typeProperties(type, index, suffix, createdMs, seed),
    };
    // A custom property is filled on about two records in three; the rest come back as null.
    for (let c = 1; c <= this.opts.customProperties; c++)
      if (unit(seed, `${type}.custom.${c}`, index) < 0.66) p[customPropertyName(c)] = `value ${c}-${index}`;
    return p;
  }

  /** The company a contact, deal or engagement belongs to (1-based), or null. */
  companyOf(type: ObjectType, index: number): number | null {
    if (type === "companies" || this.opts.companies === 0) return null;
    if (unit(this.opts.seed, `${type}.company`, index) < 0.15) return null;
    return 1 + Math.floor(unit(this.opts.seed, `${type}.company.pick`, index) * this.opts.companies);
  }

  /** The contact a deal or engagement is about (1-based), or null. */
  contactOf(type: ObjectType, index: number): number | null {
    if (type === "companies" || type === "contacts" || this.opts.contacts === 0) return null;
    if (unit(this.opts.seed, `${type}.contact`, index) < 0.1) return null;
    return 1 + Math.floor(unit(this.opts.seed, `${type}.contact.pick`, index) * this.opts.contacts);
  }

  /** The deal an engagement is logged on (1-based), or null. */
  dealOf(type: ObjectType, index: number): number | null {
    if (!isEngagement(type) || this.opts.deals === 0) return null;
    if (unit(this.opts.seed, `${type}.deal`, index) < 0.4) return null;
    return 1 + Math.floor(unit(this.opts.seed, `${type}.deal.pick`, index) * this.opts.deals);
  }
}

function typeProperties(
  type: ObjectType,
  i: number,
  suffix: string,
  createdMs: number,
  seed: number,
): Record<string, string | null> {
  const pick = <T>(stream: string, items: readonly T[]) =>
    items[Math.floor(unit(seed, `${type}.${stream}`, i) * items.length)] as T;
  const at = iso(createdMs);
  switch (type) {
    case "companies":
      return {
        name: `Company ${i}${suffix}`,
        domain: `company-${i}.example.com`,
        city: pick("city", ["Lisbon", "Porto", "Berlin", "Austin", null]),
        phone: pick("phone", [`+1 555 01${String(i % 100).padStart(2, "0")}`, null]),
        industry: pick("industry", ["COMPUTER_SOFTWARE", "RETAIL", "FINANCIAL_SERVICES", null]),
      };
    case "contacts":
      return {
        firstname: pick("first", ["Ana", "Ben", "Chloe", "Dev", "Eli"]),
        lastname: `Contact ${i}${suffix}`,
        email: pick("email", [`contact${i}@example.com`, null]),
        phone: pick("phone", [`+1 555 02${String(i % 100).padStart(2, "0")}`, null]),
        jobtitle: pick("job", ["CTO", "Buyer", null]),
        lifecyclestage: pick("stage", ["lead", "opportunity", "customer"]),
      };
    case "deals":
      return {
        dealname: `Deal ${i}${suffix}`,
        amount: String(100 * Math.floor(unit(seed, "deals.amount", i) * 500)),
        closedate: iso(createdMs + 30 * 86_400_000),
        pipeline: "default",
        dealstage: pick("stage", ["appointmentscheduled", "closedwon", "closedlost"]),
      };
    case "notes":
      return { hs_timestamp: at, hs_note_body: `<p>Note ${i}${suffix}</p>` };
    case "emails":
      return {
        hs_timestamp: at,
        hs_email_subject: `Email ${i}${suffix}`,
        hs_email_text: `Body of email ${i}`,
        hs_email_direction: pick("direction", ["EMAIL", "INCOMING_EMAIL"]),
      };
    case "calls":
      return {
        hs_timestamp: at,
        hs_call_title: `Call ${i}${suffix}`,
        hs_call_body: `<p>Call ${i}</p>`,
        hs_call_duration: String(1000 * (1 + (i % 600))),
      };
    case "tasks":
      return {
        hs_timestamp: at,
        hs_task_subject: `Task ${i}${suffix}`,
        hs_task_body: null,
        hs_task_status: pick("status", ["NOT_STARTED", "COMPLETED"]),
      };
    case "meetings":
      return {
        hs_timestamp: at,
        hs_meeting_title: `Meeting ${i}${suffix}`,
        hs_meeting_body: null,
        hs_meeting_start_time: at,
        hs_meeting_end_time: iso(createdMs + 1_800_000),
      };
  }
}
