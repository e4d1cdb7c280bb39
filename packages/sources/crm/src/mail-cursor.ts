/** Where a mail task stands and what it carries across attempts: its deals, the body source, what it fetched. */

/**
 * Where bodies come from: "list" when the account's per-deal list honours include_body (since
 * 2026, one request per deal), "fetch" when it does not (one GET per message: on a
 * large account, by far the longest phase).
 */
export type BodySource = "list" | "fetch";

/** The run fact holding the account's BodySource. */
export const BODY_SOURCE_FACT = "crm.mail.bodies";

export interface MailCursor {
  deals: string[];
  /** The deal being imported; every deal before it is done. */
  index: number;
  /** The run's finding (BODY_SOURCE_FACT), kept for the task's retries. */
  bodies?: BodySource;
  /**
   * The messages each deal's list should hold (its email_messages_count, by position in `deals`;
   * null where the source did not say): a list holding fewer is noted (mail-counts.ts).
   */
  expected?: (number | null)[];
  /** Set by the catch-up pass (the run's start): a message the listing shows updated since then is applied again. */
  since?: string;
  /**
   * What an attempt had fetched and not yet written when a rate limit (or a transient failure)
   * ended it: the message lists of deals from `index` on, and bodies by message id. The next
   * attempt starts from them and asks the source only for the rest; its first checkpoint drops
   * them from the cursor (the attempt holds them in memory from then on, and keeps them again if
   * it is ended the same way).
   */
  fetched?: FetchedMail;
}

export interface FetchedMail {
  lists: Record<string, unknown[]>;
  bodies: Record<string, string | null>;
}
