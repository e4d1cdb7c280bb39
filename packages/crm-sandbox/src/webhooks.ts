import { randomUUID } from "node:crypto";
import type { ApiResult } from "./api-routes.js";
import { badRequest, notFound } from "./api-routes.js";
import type { Dataset, RowKind } from "./dataset.js";
import { mulberry32 } from "./prng.js";
import { TOKEN_OWNER_ID } from "./words.js";

/**
 * Pipedrive's webhooks v2, as its public guide describes them
 * (https://pipedrive.readme.io/docs/guide-for-webhooks-v2, and the migration guide
 * https://pipedrive.readme.io/docs/webhooks-v2-migration-guide):
 * - created by `POST /v1/webhooks` (`subscription_url`, `event_action` create/change/delete/*,
 *   `event_object`, optional `http_auth_user`/`http_auth_password`, `version` "2.0" by default),
 *   removed by `DELETE /v1/webhooks/:id`, listed by `GET /v1/webhooks`; 40 per user;
 * - one POST per change, body `{meta, data, previous}`; a delete has `data: null` and the last
 *   state in `previous`;
 * - a delivery succeeds on any 2xx within 10 s; a failed one is tried 3 more times, after 3, 30 and
 *   150 s; every failed first attempt counts towards a ban: at 10 the webhook is banned for 30
 *   minutes and what happens meanwhile is lost, retries included;
 * - no order is promised (the sandbox shuffles each round's deliveries to prove nobody relies on one).
 * The sandbox serves only version 2.0: a request for 1.0 is refused (Pipedrive would accept it).
 * The 3-day deletion of a webhook that never succeeds is not modelled (tests do not live that long).
 */

export const WEBHOOK_OBJECTS: Readonly<Record<RowKind, string>> = {
  organizations: "organization",
  persons: "person",
  deals: "deal",
  leads: "lead",
  activities: "activity",
  notes: "note",
};
const OBJECTS = [
  ...Object.values(WEBHOOK_OBJECTS),
  "product",
  "pipeline",
  "stage",
  "user",
  "deal_product",
  "deal_installment",
];
const ACTIONS = ["create", "change", "delete", "*"];
const MAX_WEBHOOKS_PER_USER = 40;
/** Pipedrive's delivery schedule in ms: the first attempt, then 3, 30 and 150 s after a failure. */
const RETRY_DELAYS_MS = [3_000, 30_000, 150_000];
const DELIVERY_TIMEOUT_MS = 10_000;
const BAN_AFTER_FAILED_FIRST_ATTEMPTS = 10;
const BAN_MS = 30 * 60_000;
const COMPANY_ID = 7_654_321;

export interface WebhookRecord {
  id: number;
  company_id: number;
  owner_id: number;
  user_id: number;
  event_action: string;
  event_object: string;
  subscription_url: string;
  version: string;
  is_active: number;
  add_time: string;
  remove_time: string | null;
  type: string;
  http_auth_user: string | null;
  http_auth_password: string | null;
  remove_reason: string | null;
  last_delivery_time: string | null;
  last_http_status: number | null;
  admin_id: number;
  name: string;
}

/** What the hub did, for tests: every attempt, and the events a ban lost. */
export interface WebhookStats {
  attempts: number;
  delivered: number;
  failedAttempts: number;
  /** Events never delivered: dropped during a ban, or their last retry failed. */
  lost: number;
  /** Deliveries still waiting for an attempt or a retry. */
  pending: number;
}

interface WebhookState {
  record: WebhookRecord;
  failedFirstAttempts: number;
  bannedUntilMs: number;
}

export interface WebhookEvent {
  action: "create" | "change" | "delete";
  entity: string;
  entityId: string;
  data: Record<string, unknown> | null;
  previous: Record<string, unknown> | null;
}

/** Registered webhooks and their deliveries. `timeScale` shrinks every delay (tests: 0.001). */
export class WebhookHub {
  private readonly hooks = new Map<number, WebhookState>();
  private nextId = 1;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly stats: WebhookStats = {
    attempts: 0,
    delivered: 0,
    failedAttempts: 0,
    lost: 0,
    pending: 0,
  };
  private readonly shuffle: () => number;
  private closed = false;

  constructor(
    seed: number,
    private readonly timeScale: number,
    private readonly clock: () => number = Date.now,
  ) {
    this.shuffle = mulberry32(seed ^ 0x5eb400c5);
  }

  snapshot(): WebhookStats {
    return { ...this.stats };
  }

  list(): ApiResult {
    return {
      status: 200,
      body: { success: true, status: "ok", data: [...this.hooks.values()].map((h) => h.record) },
    };
  }

  add(body: unknown): ApiResult {
    if (typeof body !== "object" || body === null || Array.isArray(body))
      return badRequest("The request body must be a JSON object");
    const b = body as Record<string, unknown>;
    const url = typeof b.subscription_url === "string" ? b.subscription_url : "";
    if (!/^https?:\/\/[^/\s]+/i.test(url)) return badRequest("subscription_url must be a full, valid URL");
    if (typeof b.event_action !== "string" || !ACTIONS.includes(b.event_action))
      return badRequest(`event_action must be one of ${ACTIONS.join(", ")}`);
    if (typeof b.event_object !== "string" || !(b.event_object === "*" || OBJECTS.includes(b.event_object)))
      return badRequest(`event_object must be * or one of ${OBJECTS.join(", ")}`);
    const version = b.version === undefined ? "2.0" : b.version;
    if (version !== "2.0") return badRequest("this sandbox sends webhooks of version 2.0 only");
    for (const key of ["http_auth_user", "http_auth_password", "name"] as const)
      if (b[key] !== undefined && b[key] !== null && typeof b[key] !== "string")
        return badRequest(`${key} must be a string`);
    if (this.hooks.size >= MAX_WEBHOOKS_PER_USER)
      return badRequest(`A user can have at most ${MAX_WEBHOOKS_PER_USER} webhooks`);
    const id = this.nextId++;
    const record: WebhookRecord = {
      id,
      company_id: COMPANY_ID,
      owner_id: TOKEN_OWNER_ID,
      user_id: typeof b.user_id === "number" ? b.user_id : TOKEN_OWNER_ID,
      event_action: b.event_action,
      event_object: b.event_object,
      subscription_url: url,
      version,
      is_active: 1,
      add_time: new Date(this.clock()).toISOString(),
      remove_time: null,
      type: "general",
      http_auth_user: (b.http_auth_user as string | undefined) ?? null,
      http_auth_password: (b.http_auth_password as string | undefined) ?? null,
      remove_reason: null,
      last_delivery_time: null,
      last_http_status: null,
      admin_id: TOKEN_OWNER_ID,
      name: typeof b.name === "string" ? b.name : `webhook ${id}`,
    };
    this.hooks.set(id, { record, failedFirstAttempts: 0, bannedUntilMs: 0 });
    return { status: 201, body: { success: true, status: "ok", data: record } };
  }

  remove(rawId: string): ApiResult {
    const id = /^\d{1,10}$/.test(rawId) ? Number(rawId) : Number.NaN;
    if (!this.hooks.delete(id)) return notFound("Webhook");
    return { status: 200, body: { success: true, status: "ok" } };
  }

  /** Sends one delivery per (event, matching webhook), in no particular order. */
  emit(events: readonly WebhookEvent[]): void {
    const deliveries: { hook: WebhookState; event: WebhookEvent }[] = [];
    for (const hook of this.hooks.values())
      for (const event of events) if (matches(hook.record, event)) deliveries.push({ hook, event });
    for (let i = deliveries.length - 1; i > 0; i--) {
      const j = Math.floor(this.shuffle() * (i + 1));
      [deliveries[i], deliveries[j]] = [deliveries[j]!, deliveries[i]!];
    }
    for (const { hook, event } of deliveries) {
      if (this.clock() < hook.bannedUntilMs) {
        this.stats.lost++;
        continue;
      }
      const meta = {
        action: event.action,
        entity: event.entity,
        entity_id: event.entityId,
        id: randomUUID(),
        company_id: String(COMPANY_ID),
        correlation_id: randomUUID(),
        is_bulk_edit: false,
        timestamp: new Date(this.clock()).toISOString(),
        type: "general",
        user_id: String(TOKEN_OWNER_ID),
        version: "2.0",
        webhook_id: String(hook.record.id),
        webhook_owner_id: String(hook.record.owner_id),
        change_source: "app",
        host: "sandbox.pipedrive.com",
        permitted_user_ids: [String(TOKEN_OWNER_ID)],
      };
      this.stats.pending++;
      this.schedule(0, () => this.attempt(hook, meta, event, 1));
    }
  }

  close(): void {
    this.closed = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
  }

  private schedule(ms: number, run: () => Promise<void>): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      void run();
    }, ms * this.timeScale);
    this.timers.add(timer);
  }

  private async attempt(
    hook: WebhookState,
    meta: Record<string, unknown>,
    event: WebhookEvent,
    attempt: number,
  ): Promise<void> {
    // A webhook deleted, or banned, since: Pipedrive keeps nothing of it ("No data will be saved
    // for retries after the ban").
    if (this.closed || !this.hooks.has(hook.record.id) || this.clock() < hook.bannedUntilMs) {
      this.stats.pending--;
      this.stats.lost++;
      return;
    }
    this.stats.attempts++;
    const body = JSON.stringify({ meta: { ...meta, attempt }, data: event.data, previous: event.previous });
    const headers: Record<string, string> = { "content-type": "application/json" };
    const { http_auth_user: user, http_auth_password: password } = hook.record;
    if (user !== null || password !== null)
      headers.authorization = `Basic ${Buffer.from(`${user ?? ""}:${password ?? ""}`).toString("base64")}`;
    let status = 0;
    try {
      const res = await fetch(hook.record.subscription_url, {
        method: "POST",
        headers,
        body,
        redirect: "manual",
        // Floored at 1 s: a scaled-down timeout would fail healthy deliveries on a loaded machine.
        signal: AbortSignal.timeout(Math.max(1_000, DELIVERY_TIMEOUT_MS * this.timeScale)),
      });
      status = res.status;
      await res.arrayBuffer().catch(() => undefined);
    } catch {
      status = 0;
    }
    hook.record.last_delivery_time = new Date(this.clock()).toISOString();
    hook.record.last_http_status = status;
    if (status >= 200 && status < 300) {
      this.stats.delivered++;
      this.stats.pending--;
      // Assumption: the guide counts failed first attempts towards the ban; a success starts the
      // count again (it does not say "consecutive", but a ban for ten failures in a year is absurd).
      if (attempt === 1) hook.failedFirstAttempts = 0;
      return;
    }
    this.stats.failedAttempts++;
    if (attempt === 1 && ++hook.failedFirstAttempts >= BAN_AFTER_FAILED_FIRST_ATTEMPTS) {
      hook.bannedUntilMs = this.clock() + BAN_MS * this.timeScale;
      hook.failedFirstAttempts = 0;
    }
    const delay = RETRY_DELAYS_MS[attempt - 1];
    if (delay === undefined) {
      this.stats.pending--;
      this.stats.lost++;
      return;
    }
    this.schedule(delay, () => this.attempt(hook, meta, event, attempt + 1));
  }
}

function matches(hook: WebhookRecord, event: WebhookEvent): boolean {
  return (
    (hook.event_action === "*" || hook.event_action === event.action) &&
    (hook.event_object === "*" || hook.event_object === event.entity)
  );
}

/**
 * The events one round of the dataset's changes sends: a create per added row, a change per
 * edited row (`previous` holds the label before the edit), a delete per deleted row (`data` null,
 * `previous` its last state). `data` carries only the essential fields, as Pipedrive's does.
 */
export function roundEvents(dataset: Dataset, round: number, kinds: readonly RowKind[]): WebhookEvent[] {
  const out: WebhookEvent[] = [];
  for (const kind of kinds) {
    const entity = WEBHOOK_OBJECTS[kind];
    const label = dataset.labelField(kind);
    const publicId = (id: number): string | number => (kind === "leads" ? dataset.leadId(id - 1) : id);
    const essential = (id: number): Record<string, unknown> => {
      const row = dataset.rowAt(kind, id - 1);
      return {
        id: publicId(id),
        [label]: row[label] ?? null,
        add_time: isoTime(row.add_time),
        update_time: isoTime(row.update_time),
      };
    };
    const { created, changed, deleted } = dataset.roundChanges(kind, round);
    for (const id of created)
      out.push({
        action: "create",
        entity,
        entityId: String(publicId(id)),
        data: essential(id),
        previous: null,
      });
    for (const id of changed) {
      const data = essential(id);
      const original = String(data[label] ?? "").replace(/ \(edited( \d+)?\)$/, "");
      const before =
        round === 0 ? original : round === 1 ? `${original} (edited)` : `${original} (edited ${round})`;
      out.push({
        action: "change",
        entity,
        entityId: String(publicId(id)),
        data,
        previous: { [label]: before },
      });
    }
    for (const id of deleted)
      out.push({
        action: "delete",
        entity,
        entityId: String(publicId(id)),
        data: null,
        previous: essential(id),
      });
  }
  return out;
}

/** v1 rows carry "YYYY-MM-DD HH:MM:SS" (UTC); webhooks carry ISO 8601. */
function isoTime(value: unknown): string | null {
  if (typeof value !== "string") return null;
  return value.includes("T") ? value : `${value.replace(" ", "T")}Z`;
}
