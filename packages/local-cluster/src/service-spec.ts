/**
 * The one description of how each Drover service is started: its entry point and command, the ports
 * it listens on and the variables that say where, the environment it takes from the deployment's
 * settings and secrets, its probes and its drain. The local cluster (tests, the demo, the bench)
 * starts every process from it, and `pnpm deploy:render` writes the container images' commands, the
 * compose file and the Kubernetes manifests from it: a test that starts a service proves what the
 * manifests declare.
 */

export type ServiceName = "coordinator" | "worker" | "dashboard" | "receiver";

/** How a process is told where to listen: one `host:port` variable, or a host and a port variable. */
export type ListenVariables = { address: string } | { host: string; port: string };

export interface ServicePort {
  name: "grpc" | "http" | "metrics";
  /** The port in a deployment (each service has its own host there); the local cluster uses 0. */
  port: number;
  listen: ListenVariables;
  /** The field of the ready line that names where the process listens, its port 0 resolved. */
  readyField: "address" | "url" | "metrics";
}

/** What a probe asks, against one of the service's named ports. */
export type ServiceProbe =
  | { kind: "grpc"; port: ServicePort["name"] } // grpc.health.v1 Check of the whole server ("")
  | { kind: "http"; port: ServicePort["name"]; path: string };

export interface ServiceSpec {
  name: ServiceName;
  /** The TypeScript entry point, relative to the repository root. */
  entry: string;
  /** Node's own flags for this service, before everything else on its command line. */
  nodeFlags?: readonly string[];
  /** The workspace package the image installs (with its dependencies). */
  packageName: string;
  /** The `event` of the JSON line the process prints once it serves. */
  readyEvent: string;
  ports: readonly ServicePort[];
  /** Settings every replica shares (a ConfigMap in Kubernetes, `x-drover-settings` in compose). */
  settings: readonly string[];
  /** Credentials (a Secret in Kubernetes, an env file in compose); the process refuses to start without the required ones. */
  secrets: readonly string[];
  /** Variables naming another service's port: `DROVER_COORDINATOR_ADDRESS` → the coordinator's gRPC port. */
  links: Readonly<Record<string, { service: ServiceName; port: ServicePort["name"] }>>;
  /** How long a SIGTERM waits for work in hand (DROVER_SHUTDOWN_GRACE_MS), set explicitly everywhere. */
  shutdownGraceMs: number;
  probes: { readiness: ServiceProbe; liveness: ServiceProbe };
}

/**
 * Node runs the TypeScript sources through tsx with the workspace's source condition, exactly as the
 * tests do: one artefact, no separate build whose output could differ from what was tested.
 */
export const NODE_ARGS: readonly string[] = ["--import", "tsx", "--conditions=@drover/source"];

/** The command that starts a service, from the repository root (the image's working directory). */
export function startCommand(spec: ServiceSpec): string[] {
  return ["node", ...(spec.nodeFlags ?? []), ...NODE_ARGS, spec.entry];
}

const metricsPort = (port: number): ServicePort => ({
  name: "metrics",
  port,
  listen: { host: "DROVER_METRICS_HOST", port: "DROVER_METRICS_PORT" },
  readyField: "metrics",
});

/** The queue, the database and the lane width: coordinators and workers must agree on them. */
const ENGINE_SETTINGS = [
  "NATS_URL",
  "DROVER_STREAM_REPLICAS",
  "DROVER_QUEUE_PREFIX",
  "DROVER_LANE_WIDTH",
  "DROVER_STALE_TASK_MS",
  "LOG_LEVEL",
  "NODE_ENV",
  "OTEL_EXPORTER_OTLP_ENDPOINT",
] as const;

export const COORDINATOR: ServiceSpec = {
  name: "coordinator",
  entry: "services/coordinator/src/main.ts",
  packageName: "@drover/coordinator",
  readyEvent: "listening",
  ports: [
    { name: "grpc", port: 50051, listen: { address: "DROVER_GRPC_ADDRESS" }, readyField: "address" },
    metricsPort(9464),
  ],
  settings: [
    ...ENGINE_SETTINGS,
    "DROVER_RETENTION_DAYS",
    "DROVER_LEADER_TIMEOUT_MS",
    "DROVER_WEBHOOK_PUBLIC_URL",
    "DROVER_FOLLOW_RECONCILE_SECONDS",
  ],
  secrets: ["DATABASE_URL", "DROVER_API_KEYS", "DROVER_SECRET_KEYS"],
  links: {},
  shutdownGraceMs: 10_000,
  // The health service answers without credentials and turns NOT_SERVING as the coordinator stops.
  probes: { readiness: { kind: "grpc", port: "grpc" }, liveness: { kind: "grpc", port: "grpc" } },
};

export const WORKER: ServiceSpec = {
  name: "worker",
  entry: "services/worker/src/main.ts",
  /**
   * V8's memory reducer shrinks the heap of a process left idle ~30 s and then lets it grow only
   * slowly: a worker that waited between runs spent 1.6–2.4× the CPU of a fresh one on the same
   * copy (garbage collection 3×), until it was restarted. A worker trades that idle shrink (~25 MB)
   * for the same throughput whenever work arrives.
   */
  nodeFlags: ["--no-memory-reducer"],
  packageName: "@drover/worker",
  readyEvent: "pulling",
  // A worker serves nothing but its metrics: it pulls its work from the queue.
  ports: [metricsPort(9465)],
  settings: ENGINE_SETTINGS,
  secrets: ["DATABASE_URL", "DROVER_WORKER_TOKEN", "DROVER_SECRET_KEYS"],
  links: { DROVER_COORDINATOR_ADDRESS: { service: "coordinator", port: "grpc" } },
  shutdownGraceMs: 20_000,
  // The metrics server answers from the worker's own event loop: a wedged process stops answering.
  probes: {
    readiness: { kind: "http", port: "metrics", path: "/metrics" },
    liveness: { kind: "http", port: "metrics", path: "/metrics" },
  },
};

export const DASHBOARD: ServiceSpec = {
  name: "dashboard",
  entry: "services/dashboard/src/main.ts",
  packageName: "@drover/dashboard",
  readyEvent: "listening",
  ports: [
    { name: "http", port: 8080, listen: { address: "DROVER_DASHBOARD_ADDRESS" }, readyField: "url" },
    metricsPort(9466),
  ],
  settings: ["LOG_LEVEL", "NODE_ENV", "OTEL_EXPORTER_OTLP_ENDPOINT"],
  // The run page holds no credential: each request carries the operator's key to the coordinator.
  secrets: [],
  links: { DROVER_COORDINATOR_ADDRESS: { service: "coordinator", port: "grpc" } },
  shutdownGraceMs: 5_000,
  probes: {
    readiness: { kind: "http", port: "http", path: "/healthz" },
    liveness: { kind: "http", port: "http", path: "/healthz" },
  },
};

/**
 * The webhook receiver (services/receiver): the one service the internet reaches (docs/follow.md
 * says how to expose it). It answers the source within its 10 s and stores each delivery in
 * JetStream; the coordinator's leader turns them into work.
 */
export const RECEIVER: ServiceSpec = {
  name: "receiver",
  entry: "services/receiver/src/main.ts",
  packageName: "@drover/receiver",
  readyEvent: "receiving",
  ports: [
    {
      name: "http",
      port: 8088,
      listen: { host: "DROVER_RECEIVER_HOST", port: "DROVER_RECEIVER_PORT" },
      readyField: "url",
    },
  ],
  settings: [
    "NATS_URL",
    "DROVER_STREAM_REPLICAS",
    "DROVER_QUEUE_PREFIX",
    "DROVER_RECEIVER_MAX_BODY_BYTES",
    "LOG_LEVEL",
    "NODE_ENV",
  ],
  // A credential check reads a SHA-256 from the database; nothing it holds opens a source secret.
  secrets: ["DATABASE_URL"],
  links: {},
  shutdownGraceMs: 5_000,
  probes: {
    readiness: { kind: "http", port: "http", path: "/healthz" },
    liveness: { kind: "http", port: "http", path: "/healthz" },
  },
};

export const SERVICES: Readonly<Record<ServiceName, ServiceSpec>> = {
  coordinator: COORDINATOR,
  worker: WORKER,
  dashboard: DASHBOARD,
  receiver: RECEIVER,
};

/**
 * Seconds a deployment gives a stopping process before it kills it: the drain, plus time to close
 * the queue and database connections after it. Shorter than the drain, a rolling update would kill
 * workers mid-window and leave their tasks to the stale-lock reaper.
 */
export function terminationGraceSeconds(spec: ServiceSpec): number {
  return Math.ceil(spec.shutdownGraceMs / 1000) + 15;
}

export function servicePort(spec: ServiceSpec, name: ServicePort["name"]): ServicePort {
  const port = spec.ports.find((p) => p.name === name);
  if (!port) throw new Error(`the ${spec.name} has no ${name} port`);
  return port;
}

/** The variables that put `port` on `host`:`number`. */
export function listenEnv(port: ServicePort, host: string, number: number): Record<string, string> {
  return "address" in port.listen
    ? { [port.listen.address]: `${host}:${number}` }
    : { [port.listen.host]: host, [port.listen.port]: String(number) };
}

export interface ServiceEnvInput {
  /** Values of the spec's settings; a setting left out is left to the service's default. */
  settings: Readonly<Record<string, string>>;
  /** Values of the spec's secrets; the launcher passes whichever it has. */
  secrets: Readonly<Record<string, string>>;
  /** The address (`host:port`) behind each link. */
  links: Readonly<Record<string, string>>;
  /** Where every port listens: all interfaces in a container, loopback locally. */
  host: string;
  /** Port numbers: the spec's own in a deployment, 0 (any free one) locally. */
  portNumber: (port: ServicePort) => number;
}

/**
 * A service's whole environment, from the spec. Refuses a setting or secret the spec does not
 * declare, and a link left without an address: what a launcher passes is what a manifest can declare.
 */
export function serviceEnv(spec: ServiceSpec, input: ServiceEnvInput): Record<string, string> {
  const undeclared = [
    ...Object.keys(input.settings).filter((k) => !spec.settings.includes(k)),
    ...Object.keys(input.secrets).filter((k) => !spec.secrets.includes(k)),
  ];
  if (undeclared.length > 0)
    throw new Error(`the ${spec.name}'s spec declares no ${undeclared.join(", ")} (service-spec.ts)`);
  const env: Record<string, string> = { ...input.settings, ...input.secrets };
  for (const name of Object.keys(spec.links)) {
    const address = input.links[name];
    if (!address) throw new Error(`the ${spec.name} needs an address for ${name}`);
    env[name] = address;
  }
  for (const port of spec.ports) Object.assign(env, listenEnv(port, input.host, input.portNumber(port)));
  env.DROVER_SHUTDOWN_GRACE_MS = String(spec.shutdownGraceMs);
  return env;
}
