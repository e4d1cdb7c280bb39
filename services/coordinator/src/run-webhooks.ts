import { createHash, randomBytes } from "node:crypto";
import type { SecretKeyring } from "@drover/auth";
import { type FollowFeed, type RunRow, runs } from "@drover/db";
import { openSourceSecret, toRunInfo } from "@drover/engine";
import { eq, sql } from "drizzle-orm";
import type { CoordinatorContext } from "./context.js";

/** The associated data a run's webhook credential is sealed with: it opens for this run only. */
export function webhookSecretContext(runId: string): string {
  return `drover.run_webhooks.secret:${runId}`;
}

/** The path under the receiver's public URL that takes a run's deliveries (services/receiver). */
export function webhookUrl(publicUrl: string, runId: string): string {
  return `${publicUrl.replace(/\/+$/, "")}/pipedrive/${runId}`;
}

/** A registration older than this still marked `registering` was cut off (its coordinator died). */
const REGISTERING_STALE_MS = 5 * 60_000;

/**
 * A follow run's webhooks at its source (drover.run_webhooks): registered when the run starts
 * following, removed when it cuts over (CompleteRun) or stops, registered again when it resumes.
 * The source's calls run after the RPC answered, never inside it: a slow or refusing source
 * costs the run its webhooks (it then polls, with the reason on its page), never its start.
 * Every step is fenced on the row's mode, so a stop racing a registration removes what the
 * registration made. The leader's sweep removes the webhooks of runs that ended while no
 * coordinator did (a crash between the end and the removal).
 */
export class RunWebhooks {
  constructor(
    private readonly ctx: CoordinatorContext,
    private readonly secrets: SecretKeyring,
  ) {}

  /** A follow run was admitted with `apiToken`: its webhooks are registered (or it polls, saying why). */
  async startFollowing(run: RunRow, apiToken: string): Promise<void> {
    const password = randomBytes(32).toString("base64url");
    const sealed = this.secrets.seal(password, webhookSecretContext(run.id));
    const user = `drover-${run.id}`;
    await this.ctx.db.execute(sql`
      insert into drover.run_webhooks (run_id, auth_user, secret_sha256, secret_ciphertext, secret_key_id, mode)
      values (${run.id}::uuid, ${user}, ${sha256(password)}, ${sealed.ciphertext}, ${sealed.keyId}, 'registering')
      on conflict (run_id) do nothing`);
    await this.register(run, apiToken, user, password);
  }

  /** A stopped follow run resumes: the webhooks its stop removed are made again, with the same credential. */
  async resumeFollowing(run: RunRow): Promise<void> {
    const [row] = await this.ctx.db.execute<{
      auth_user: string;
      secret_ciphertext: string;
      secret_key_id: string;
    }>(sql`
      update drover.run_webhooks set mode = 'registering', removed_at = null, reason = null, updated_at = now()
       where run_id = ${run.id}::uuid and mode in ('removed', 'polling')
       returning auth_user, secret_ciphertext, secret_key_id`);
    if (!row) return;
    const password = this.secrets.open(
      { keyId: row.secret_key_id, ciphertext: row.secret_ciphertext },
      webhookSecretContext(run.id),
    );
    const apiToken = openSourceSecret(run, this.secrets);
    if (apiToken === undefined)
      return this.poll(run.id, "the run holds no source credential to register webhooks with");
    await this.register(run, apiToken, row.auth_user, password);
  }

  /**
   * Removes the run's webhooks at the source and refuses its deliveries from now on (the
   * receiver reads removed_at). The reconciling pass at cutover reads what they would have said.
   */
  async stopFollowing(runId: string): Promise<void> {
    const [row] = await this.ctx.db.execute<{ ids: string[] }>(sql`
      update drover.run_webhooks set mode = 'removed', removed_at = now(), updated_at = now()
       where run_id = ${runId}::uuid and removed_at is null
       returning (select coalesce(jsonb_agg(x), '[]'::jsonb) from jsonb_array_elements_text(webhook_ids) x) as ids`);
    if (!row) return;
    await this.setFeed(runId, {
      mode: "polling",
      reason: "its webhooks were removed (the run stopped or cut over)",
      reconcileSeconds: null,
      lastEventAt: null,
    });
    if (row.ids.length > 0) await this.removeAtSource(runId, row.ids);
  }

  /**
   * Leader: webhooks of runs that ended (or stopped, or cut over) while still registered are
   * removed; a registration cut off by a dying coordinator leaves its run polling.
   */
  async sweep(): Promise<void> {
    const ended = await this.ctx.db.execute<{ run_id: string }>(sql`
      select w.run_id from drover.run_webhooks w join drover.runs r on r.id = w.run_id
       where w.removed_at is null
         and (r.status in ('succeeded', 'failed', 'stopped') or (r.follow ->> 'cutoverAt') is not null)
       limit 50`);
    for (const { run_id } of ended)
      await this.stopFollowing(run_id).catch((err) =>
        this.ctx.logger.warn(
          { err, run_id },
          "removing an ended run's webhooks failed; the next sweep tries again",
        ),
      );
    await this.ctx.db.execute(sql`
      update drover.run_webhooks
         set mode = 'polling', reason = 'its webhook registration was cut off (the coordinator stopped); it polls', updated_at = now()
       where mode = 'registering' and updated_at < now() - make_interval(secs => ${REGISTERING_STALE_MS / 1000})`);
  }

  private async register(run: RunRow, apiToken: string, user: string, password: string): Promise<void> {
    const hooks = this.ctx.providers.get(run.source)?.webhooks;
    const publicUrl = this.ctx.config.webhookPublicUrl;
    if (!hooks) return this.poll(run.id, `source ${run.source} sends no webhooks`);
    if (!publicUrl)
      return this.poll(
        run.id,
        "no public URL is configured for the webhook receiver (DROVER_WEBHOOK_PUBLIC_URL)",
      );
    let ids: string[];
    try {
      ids = await hooks.register(toRunInfo(run), apiToken, {
        url: webhookUrl(publicUrl, run.id),
        user,
        password,
      });
    } catch (err) {
      return this.poll(run.id, (err as Error).message);
    }
    // Fenced on the registration still wanted: a stop (or the end) that came meanwhile wins, and
    // what was just made is removed again.
    const [kept] = await this.ctx.db.execute(sql`
      update drover.run_webhooks set mode = 'webhooks', webhook_ids = ${JSON.stringify(ids)}::jsonb, updated_at = now()
       where run_id = ${run.id}::uuid and mode = 'registering'
       returning run_id`);
    if (!kept) {
      await hooks.remove(toRunInfo(run), apiToken, ids).catch(() => {});
      return;
    }
    await this.setFeed(run.id, {
      mode: "webhooks",
      reason: null,
      reconcileSeconds: this.ctx.config.followReconcileSeconds,
      lastEventAt: null,
    });
    this.ctx.logger.info(
      { run_id: run.id, webhooks: ids.length },
      "follow run receives the source's webhooks",
    );
  }

  private async poll(runId: string, reason: string): Promise<void> {
    const [moved] = await this.ctx.db.execute(sql`
      update drover.run_webhooks set mode = 'polling', reason = ${reason}, updated_at = now()
       where run_id = ${runId}::uuid and mode = 'registering'
       returning run_id`);
    if (moved)
      await this.setFeed(runId, { mode: "polling", reason, reconcileSeconds: null, lastEventAt: null });
    this.ctx.logger.info({ run_id: runId, reason }, "follow run polls its source (no webhooks)");
  }

  private setFeed(runId: string, feed: FollowFeed): Promise<void> {
    return writeFeed(this.ctx, runId, feed);
  }

  private async removeAtSource(runId: string, ids: string[]): Promise<void> {
    const [run] = await this.ctx.db.select().from(runs).where(eq(runs.id, runId));
    const hooks = run ? this.ctx.providers.get(run.source)?.webhooks : undefined;
    if (!run || !hooks) return;
    const apiToken = openSourceSecret(run, this.secrets);
    if (apiToken === undefined) return;
    try {
      await hooks.remove(toRunInfo(run), apiToken, ids);
    } catch (err) {
      // Deliveries to a removed run are refused by the receiver; Pipedrive deletes a webhook
      // that has no successful delivery for 3 days. Put the ids back so the sweep tries again.
      await this.ctx.db.execute(sql`
        update drover.run_webhooks set removed_at = null, mode = 'webhooks', updated_at = now()
         where run_id = ${runId}::uuid and mode = 'removed'`);
      throw err;
    }
    this.ctx.logger.info({ run_id: runId, webhooks: ids.length }, "follow run's webhooks removed");
  }
}

/** The feed as the run's follow state shows it; one atomic statement, so it races no pass's close. */
async function writeFeed(ctx: CoordinatorContext, runId: string, feed: FollowFeed): Promise<void> {
  await ctx.db.execute(sql`
    update drover.runs set follow = jsonb_set(follow, '{feed}', ${JSON.stringify(feed)}::jsonb)
     where id = ${runId}::uuid and follow is not null`);
}

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}
