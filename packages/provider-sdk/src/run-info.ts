/** What a provider sees of the run. The secret is present only where a worker needs it. */
export interface RunInfo {
  id: string;
  tenantId: string;
  source: string;
  sourceAccount: string;
  kinds: readonly string[];
  plan: readonly (readonly string[])[];
  sourceConfig: Record<string, unknown>;
  secret?: string | undefined;
  startedAt: Date | null;
  /** A dry run: its windows are counted and rolled back, nothing reaches the product or the ledger. */
  dryRun?: boolean | undefined;
}
