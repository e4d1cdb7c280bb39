import type { RunInfo, SourceWebhooks, WebhookTarget } from "@drover/provider-sdk";
import { runSettings } from "./config.js";
import { eventSeeds } from "./follow-events.js";

/**
 * Pipedrive's webhooks v2 for a follow run (https://pipedrive.readme.io/docs/guide-for-webhooks-v2):
 * one webhook per kind the run imports (`event_action` "*", every create, change and delete of
 * that object), version 2.0, delivering to the receiver with the run's basic-auth credential.
 * Mail has no webhook (Pipedrive sends none): the reconciling poll reads it. Six webhooks of the
 * 40 a Pipedrive user may hold. Calls cost no tokens worth pacing: two per kind over a run's life.
 */
export const WEBHOOK_OBJECT_OF_KIND: Readonly<Record<string, string>> = {
  organizations: "organization",
  persons: "person",
  deals: "deal",
  leads: "lead",
  activities: "activity",
  notes: "note",
};

/**
 * What a webhooks v2 event says changed: `meta.entity` names the object (its kind), `meta.entity_id`
 * the row, `meta.timestamp` when.
 */
function eventChange(body: unknown): { kind: string; id: string; timestamp: string | null } | undefined {
  const meta = (body as { meta?: { entity?: unknown; entity_id?: unknown; timestamp?: unknown } } | null)
    ?.meta;
  const kind = typeof meta?.entity === "string" ? kindOfWebhookEntity(meta.entity) : undefined;
  const entityId = meta?.entity_id;
  if (!kind || (typeof entityId !== "string" && typeof entityId !== "number")) return undefined;
  const ts = meta?.timestamp;
  const timestamp =
    typeof ts === "string" && !Number.isNaN(Date.parse(ts)) ? new Date(ts).toISOString() : null;
  return { kind, id: String(entityId), timestamp };
}

/** The kind a webhook's `meta.entity` names; undefined for an object no run imports. */
export function kindOfWebhookEntity(entity: string): string | undefined {
  return Object.entries(WEBHOOK_OBJECT_OF_KIND).find(([, object]) => object === entity)?.[0];
}

const TIMEOUT_MS = 15_000;

/** The source refused or could not be reached: the run follows by polling, and says so with this message. */
export class WebhookRegistrationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WebhookRegistrationError";
  }
}

async function call(
  baseUrl: string,
  secret: string,
  method: "POST" | "DELETE",
  path: string,
  body?: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${baseUrl.replace(/\/+$/, "")}${path}`, {
    method,
    headers: { "x-api-token": secret, "content-type": "application/json", accept: "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(TIMEOUT_MS),
  });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // An HTML error page: the status says enough.
  }
  return { status: res.status, json };
}

export const crmWebhooks: SourceWebhooks = {
  async register(run: RunInfo, secret: string, target: WebhookTarget): Promise<string[]> {
    const { baseUrl } = runSettings(run);
    const objects = run.kinds
      .map((k) => WEBHOOK_OBJECT_OF_KIND[k])
      .filter((o): o is string => o !== undefined);
    // A run of mail alone has nothing a webhook reports: it polls, as mail always is.
    if (objects.length === 0)
      throw new WebhookRegistrationError(
        "none of the run's kinds has webhooks (Pipedrive sends none for mail)",
      );
    const made: string[] = [];
    try {
      for (const object of objects) {
        const { status, json } = await call(baseUrl, secret, "POST", "/v1/webhooks", {
          subscription_url: target.url,
          event_action: "*",
          event_object: object,
          http_auth_user: target.user,
          http_auth_password: target.password,
          version: "2.0",
          name: `drover run ${run.id} ${object}`,
        });
        const id = (json.data as { id?: unknown } | undefined)?.id;
        if (status >= 300 || (typeof id !== "number" && typeof id !== "string"))
          throw new WebhookRegistrationError(
            `Pipedrive refused the ${object} webhook (HTTP ${status}${typeof json.error === "string" ? `: ${json.error}` : ""})`,
          );
        made.push(String(id));
      }
      return made;
    } catch (err) {
      await crmWebhooks.remove(run, secret, made).catch(() => {});
      if (err instanceof WebhookRegistrationError) throw err;
      throw new WebhookRegistrationError(
        `Pipedrive could not be reached to register webhooks: ${(err as Error).message}`,
      );
    }
  },

  async remove(run: RunInfo, secret: string, ids: readonly string[]): Promise<void> {
    const { baseUrl } = runSettings(run);
    for (const id of ids) {
      const { status } = await call(baseUrl, secret, "DELETE", `/v1/webhooks/${encodeURIComponent(id)}`);
      // Gone already (deleted by hand, or by Pipedrive after 3 days without a delivery): done.
      if (status >= 300 && status !== 404 && status !== 410)
        throw new Error(`Pipedrive refused to delete webhook ${id} (HTTP ${status})`);
    }
  },

  eventChange,
  eventSeeds,
};
