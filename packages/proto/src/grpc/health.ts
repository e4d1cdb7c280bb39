import {
  type Health,
  HealthCheckResponse_ServingStatus as ServingStatus,
} from "../gen/grpc/health/v1/health_pb.js";
import type { ServiceImplementation } from "./add-service.js";
import { Code, RpcError } from "./rpc-error.js";

export type HealthStatus = "SERVING" | "NOT_SERVING";

export interface HealthService {
  /** `""` is the whole server; otherwise a fully qualified name such as `drover.v1.RunService`. */
  setStatus(service: string, status: HealthStatus): void;
  /** Register with `addService(server, Health, health.implementation)`. */
  readonly implementation: ServiceImplementation<typeof Health>;
}

/** The standard grpc.health.v1 service; the whole server (`""`) starts SERVING. */
export function createHealthService(): HealthService {
  const statuses = new Map<string, ServingStatus>([["", ServingStatus.SERVING]]);
  // Replaced on every change, so each watcher waits on the promise current when it last looked.
  let changed = signalOnce();

  const implementation: ServiceImplementation<typeof Health> = {
    async check(request) {
      const status = statuses.get(request.service);
      if (status === undefined) throw new RpcError(Code.NOT_FOUND, `unknown service "${request.service}"`);
      return { status };
    },
    async list() {
      return { statuses: Object.fromEntries([...statuses].map(([name, status]) => [name, { status }])) };
    },
    async *watch(request, ctx) {
      let sent: ServingStatus | undefined;
      while (!ctx.signal.aborted) {
        const status = statuses.get(request.service) ?? ServingStatus.SERVICE_UNKNOWN;
        if (status !== sent) {
          sent = status;
          yield { status };
          continue;
        }
        await Promise.race([changed.promise, aborted(ctx.signal)]);
      }
    },
  };

  return {
    setStatus(service, status) {
      statuses.set(service, ServingStatus[status]);
      const previous = changed;
      changed = signalOnce();
      previous.fire();
    },
    implementation,
  };
}

function signalOnce(): { promise: Promise<void>; fire: () => void } {
  let fire = () => {};
  const promise = new Promise<void>((resolve) => {
    fire = resolve;
  });
  return { promise, fire };
}

function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
}
