import { type Db, leaderAddress } from "@drover/db";
import { type Client, Code, isRpcError, type WorkerService } from "@drover/proto";

type WorkerClient = Client<typeof WorkerService>;

/**
 * The worker's line to the coordinators. It starts at the configured address; when a call finds
 * that coordinator gone (UNAVAILABLE) or silent (DEADLINE_EXCEEDED: a host cut off from the
 * network refuses nothing, it just never answers), it looks up where the leader announced itself
 * in Postgres and moves there, so a worker outlives the coordinator it was pointed at, and leaves
 * a leader that lost the lease behind a partition. The failed call still fails: callers already
 * retry (budget leases) or do not need the answer (TaskFinished).
 */
export class CoordinatorLink
  implements Pick<WorkerClient, "leaseBudget" | "reportBudget" | "taskFinished" | "getSettings">
{
  private address: string;
  private client: WorkerClient;
  private resolving: Promise<void> | undefined;

  constructor(
    configured: string,
    private readonly db: Db,
    private readonly connect: (address: string) => WorkerClient,
  ) {
    this.address = configured;
    this.client = connect(configured);
  }

  leaseBudget: WorkerClient["leaseBudget"] = (req, opts) => this.call((c) => c.leaseBudget(req, opts));
  reportBudget: WorkerClient["reportBudget"] = (req, opts) => this.call((c) => c.reportBudget(req, opts));
  taskFinished: WorkerClient["taskFinished"] = (req, opts) => this.call((c) => c.taskFinished(req, opts));
  getSettings: WorkerClient["getSettings"] = (req, opts) => this.call((c) => c.getSettings(req, opts));

  close(): void {
    this.client.close();
  }

  private async call<T>(fn: (c: WorkerClient) => Promise<T>): Promise<T> {
    try {
      return await fn(this.client);
    } catch (err) {
      if (isRpcError(err, Code.UNAVAILABLE) || isRpcError(err, Code.DEADLINE_EXCEEDED)) {
        this.resolving ??= this.moveToLeader().finally(() => {
          this.resolving = undefined;
        });
        await this.resolving;
      }
      throw err;
    }
  }

  private async moveToLeader(): Promise<void> {
    const address = await leaderAddress(this.db).catch(() => undefined);
    if (!address || address === this.address) return;
    this.client.close();
    this.address = address;
    this.client = this.connect(address);
  }
}
