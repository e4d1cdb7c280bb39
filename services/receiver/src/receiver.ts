import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Db } from "@drover/db";
import { publishWebhookEvent, type WebhookEventNames } from "@drover/task-queue";
import type { Logger } from "@drover/telemetry";
import type { JetStreamClient } from "@nats-io/jetstream";
import { sql } from "drizzle-orm";

/**
 * The webhook receiver: the one public HTTP endpoint of a deployment. Why a service of its own
 * rather than a route of the coordinator or the worker: it is the only part reachable from the
 * internet (the coordinator's gRPC API and the workers stay private), it must answer the source
 * within 10 s whatever the engine is doing (a leader change, a deploy of workers, a database
 * under load does not touch it beyond one indexed read), and it scales with the deliveries the
 * source sends, not with runs or tasks. It holds no secret that opens anything: it checks a
 * delivery's password against a SHA-256 (drover.run_webhooks) and writes to JetStream.
 *
 * Per delivery, `POST <path prefix>/<run id>`:
 *   - 401 unless basic auth names the run's user and password (an unknown or ended run too);
 *   - 413 for a body over the limit (checked on Content-Length and while reading);
 *   - 400 unless the body is a webhooks v2 event: `{meta: {id, action, entity, entity_id, version
 *     "2.0"}, data, previous}` (https://pipedrive.readme.io/docs/guide-for-webhooks-v2);
 *   - 200 once JetStream has stored it (its ack), a duplicate event id included (dropped by
 *     JetStream's window, webhook-events.ts); 503 if it could not be stored, so Pipedrive retries.
 * A refused delivery writes nothing.
 */
export interface ReceiverDeps {
  db: Db;
  js: JetStreamClient;
  names: WebhookEventNames;
  logger: Logger;
  /** Largest body accepted; Pipedrive's events are a few kilobytes. */
  maxBodyBytes: number;
  /** Path before the run id, e.g. "/pipedrive". */
  pathPrefix?: string;
  /** How long a run's credential is trusted from memory before it is read again. */
  credentialTtlMs?: number;
}

export interface ReceiverCounts {
  stored: number;
  duplicates: number;
  refused: Record<number, number>;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ACTIONS = new Set(["create", "change", "delete"]);

/** The parts of a delivery the engine reads; the rest is kept as sent. */
export interface WebhookDelivery {
  meta: { id: string; action: string; entity: string; entity_id: string; [key: string]: unknown };
  data: Record<string, unknown> | null;
  previous: Record<string, unknown> | null;
}

/** Why a body is not a webhooks v2 event; undefined when it is one. */
export function deliveryProblem(body: unknown): string | undefined {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    return "the body is not a JSON object";
  const { meta, data, previous } = body as Record<string, unknown>;
  if (typeof meta !== "object" || meta === null || Array.isArray(meta)) return "meta is missing";
  const m = meta as Record<string, unknown>;
  if (typeof m.id !== "string" || m.id.length === 0 || m.id.length > 200) return "meta.id is missing";
  if (typeof m.action !== "string" || !ACTIONS.has(m.action))
    return "meta.action is not one of create, change, delete";
  if (typeof m.entity !== "string" || !/^[a-z_]{1,40}$/.test(m.entity)) return "meta.entity is missing";
  const entityId = m.entity_id;
  if (
    !(typeof entityId === "string" && entityId.length > 0 && entityId.length <= 64) &&
    !Number.isInteger(entityId)
  )
    return "meta.entity_id is missing";
  if (m.version !== "2.0") return "meta.version is not 2.0 (register the webhook with version 2.0)";
  for (const [name, part] of [
    ["data", data],
    ["previous", previous],
  ] as const)
    if (part !== null && part !== undefined && (typeof part !== "object" || Array.isArray(part)))
      return `${name} is neither an object nor null`;
  return undefined;
}

export class WebhookReceiver {
  readonly counts: ReceiverCounts = { stored: 0, duplicates: 0, refused: {} };
  private readonly credentials = new Map<string, { user: string; sha256: Buffer; until: number }>();
  private readonly prefix: string;

  constructor(private readonly deps: ReceiverDeps) {
    this.prefix = (deps.pathPrefix ?? "/pipedrive").replace(/\/+$/, "");
  }

  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    this.serve(req, res).catch((err: unknown) => {
      this.deps.logger.error({ err }, "webhook delivery failed");
      if (!res.headersSent) this.answer(res, 503, "could not store the event; retry");
      else res.destroy();
    });
  };

  private answer(res: ServerResponse, status: number, message: string): void {
    if (status >= 400 && status !== 503) this.counts.refused[status] = (this.counts.refused[status] ?? 0) + 1;
    const text = JSON.stringify(status < 300 ? { ok: true } : { error: message });
    // A refused body may still be arriving: close the connection rather than read it to the end.
    res.writeHead(status, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(text),
      ...(status === 413 ? { connection: "close" } : {}),
    });
    res.end(text);
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    if (path === "/healthz") return this.answer(res, 200, "ok");
    const runId = path.startsWith(`${this.prefix}/`) ? path.slice(this.prefix.length + 1) : "";
    if (!UUID.test(runId)) return this.answer(res, 404, "no such endpoint");
    if (req.method !== "POST") return this.answer(res, 405, "deliveries are POSTed");
    const declared = Number(req.headers["content-length"] ?? 0);
    if (declared > this.deps.maxBodyBytes) return this.answer(res, 413, "the body is too large");
    if (!(await this.authenticated(runId, req.headers.authorization)))
      return this.answer(res, 401, "unknown run or wrong credentials");
    const body = await this.readBody(req);
    if (body === undefined) return this.answer(res, 413, "the body is too large");
    let event: unknown;
    try {
      event = JSON.parse(body.toString("utf8"));
    } catch {
      return this.answer(res, 400, "the body is not JSON");
    }
    const problem = deliveryProblem(event);
    if (problem) return this.answer(res, 400, problem);
    const delivery = event as WebhookDelivery;
    const { duplicate } = await publishWebhookEvent(
      this.deps.js,
      this.deps.names,
      runId,
      delivery.meta.id,
      body,
    );
    if (duplicate) this.counts.duplicates++;
    else this.counts.stored++;
    this.answer(res, 200, "stored");
  }

  private async readBody(req: IncomingMessage): Promise<Buffer | undefined> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > this.deps.maxBodyBytes) return undefined;
      chunks.push(chunk);
    }
    return Buffer.concat(chunks);
  }

  private async authenticated(runId: string, header: string | undefined): Promise<boolean> {
    const match = /^Basic ([A-Za-z0-9+/=]{1,512})$/.exec(header ?? "");
    if (!match) return false;
    const decoded = Buffer.from(match[1]!, "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    if (colon < 0) return false;
    const user = decoded.slice(0, colon);
    const password = decoded.slice(colon + 1);
    const known = await this.credential(runId);
    if (!known || known.user !== user) return false;
    return timingSafeEqual(createHash("sha256").update(password).digest(), known.sha256);
  }

  private async credential(runId: string): Promise<{ user: string; sha256: Buffer } | undefined> {
    const now = Date.now();
    const cached = this.credentials.get(runId);
    if (cached && cached.until > now) return cached;
    // Only a live registration authenticates: once the run ended and its webhooks were removed,
    // a late delivery is refused (and stored nowhere).
    const [row] = await this.deps.db.execute<{ auth_user: string; secret_sha256: string }>(sql`
      select auth_user, secret_sha256 from drover.run_webhooks
       where run_id = ${runId}::uuid and removed_at is null`);
    if (!row) {
      this.credentials.delete(runId);
      return undefined;
    }
    const entry = {
      user: row.auth_user,
      sha256: Buffer.from(row.secret_sha256, "hex"),
      until: now + (this.deps.credentialTtlMs ?? 5_000),
    };
    if (this.credentials.size > 10_000) this.credentials.clear();
    this.credentials.set(runId, entry);
    return entry;
  }
}
