import { StartRunResponseSchema } from "@drover/proto";
import { type CommandContext, type Flags, need, UsageError } from "../command-context.js";
import { statusName } from "../render.js";

/** `--setting k=v`, repeatable: the source's own settings. */
function sourceSettings(flags: Flags): Record<string, string> {
  const settings: Record<string, string> = {};
  for (const s of (flags.setting as string[] | undefined) ?? []) {
    const eq = s.indexOf("=");
    if (eq <= 0) throw new UsageError(`--setting takes key=value, got "${s}"`);
    settings[s.slice(0, eq)] = s.slice(eq + 1);
  }
  return settings;
}

/** `--daily-share F`: the share of the account's daily budget the run may spend per day. */
function dailyShareFlag(flags: Flags): number | undefined {
  const share = flags["daily-share"] as string | undefined;
  const dailyShare = share === undefined ? undefined : Number(share);
  if (dailyShare !== undefined && !(dailyShare > 0 && dailyShare <= 1))
    throw new UsageError(`--daily-share takes a share above 0 and at most 1 (e.g. 0.5), got "${share}"`);
  return dailyShare;
}

/** `--follow-interval S`: seconds between a follow run's catch-up passes; only with --follow. */
function followIntervalFlag(flags: Flags): number | undefined {
  const interval = flags["follow-interval"] as string | undefined;
  if (interval !== undefined && flags.follow !== true)
    throw new UsageError("--follow-interval needs --follow");
  const followIntervalSeconds = interval === undefined ? undefined : Number(interval);
  if (
    followIntervalSeconds !== undefined &&
    !(Number.isInteger(followIntervalSeconds) && followIntervalSeconds >= 1)
  )
    throw new UsageError(`--follow-interval takes whole seconds, at least 1, got "${interval}"`);
  return followIntervalSeconds;
}

/** `drover start`: asks the coordinator for a run (or a dry run) of one source account. */
export async function start({ client, env, flags, print }: CommandContext): Promise<number> {
  const settings = sourceSettings(flags);
  const dailyShare = dailyShareFlag(flags);
  const followIntervalSeconds = followIntervalFlag(flags);
  const response = await client.startRun({
    tenantId: need(flags, "tenant"),
    source: (flags.source as string | undefined) ?? "crm",
    sourceAccount: need(flags, "account"),
    kinds: typeof flags.kinds === "string" ? flags.kinds.split(",").filter(Boolean) : [],
    sourceConfig: {
      // Only some sources have an API address (crm does, pg-table does not): the source says.
      baseUrl: (flags["base-url"] as string | undefined) ?? "",
      apiToken: (flags["api-token"] as string | undefined) ?? env.DROVER_SOURCE_TOKEN ?? "",
      settings,
    },
    ...(dailyShare !== undefined ? { dailyShare } : {}),
    ...(flags.follow === true ? { follow: true } : {}),
    ...(followIntervalSeconds !== undefined ? { followIntervalSeconds } : {}),
    ...(flags["dry-run"] === true ? { dryRun: true } : {}),
  });
  const run = response.run!;
  const what = run.dryRun ? "dry run" : "run";
  print(
    `started ${what} ${run.id} (${statusName(run.status)})\nfollow it with: drover watch ${run.id}${run.dryRun ? `; its report: drover status ${run.id}` : ""}`,
    StartRunResponseSchema,
    response,
  );
  return 0;
}
