import { type Db, leaderAddress } from "@drover/db";
import { type Client, Code, isRpcError, type WorkerService } from "@drover/proto";

type WorkerClient = Client<typeof WorkerService>;

/**
 * The worker's line to the coordinators. It starts at the configured address; when a call finds
 * that coordinator gone (UNAVAILABLE) or silent (DEADLINE_EXCEEDED: a host cut off from the
 * network refuses nothing, it just never answers), it looks up where the leader announced itself
 * in Postgres and moves there, so a worker outlives the coordinator it was pointed at, and leaves
 * a leader that lost the lease behind a partition. An announced address this host cannot reach
 * (the leader listens on its own host's loopback, or a route this host lacks) fails the same way:
 * then the link goes back to the configured address, which reached a coordinator before, rather
 * than asking the one it cannot reach forever. The failed call still fails: callers already retry
 * (budget leases) or do not need the answer (TaskFinished).
 */
export class CoordinatorLink
  implements Pick<WorkerClient, "leaseBudget" | "reportBudget" | "taskFinished" | "getSettings">
{
  private address: string;
  private client: WorkerClient;
  private resolving: Promise<void> | undefined;

  constructor(
    private readonly configured: string,
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
        this.resolving ??= this.moveOn().finally(() => {
          this.resolving = undefined;
        });
        await this.resolving;
      }
      throw err;
    }
  }

  /** To the leader's announced address, or back to the configured one when that is where the call failed. */
  private async moveOn(): Promise<void> {
    const leader = await leaderAddress(this.db).catch(() => undefined);
    const address = leader && leader !== this.address ? leader : this.configured;
    if (address === this.address) return;
    this.client.close();
    this.address = address;
    this.client = this.connect(address);
  }
}
