import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ScaledObject } from "@kubernetes-models/keda/keda.sh/v1alpha1";
import { Deployment, StatefulSet } from "kubernetes-models/apps/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { ConfigMap, Service } from "kubernetes-models/v1";
import { describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { PRODUCTION, renderDeployFiles } from "../src/deploy-manifests.js";
import { REPO_ROOT } from "../src/service-process.js";
import {
  COORDINATOR,
  SERVICES,
  type ServiceSpec,
  terminationGraceSeconds,
  WORKER,
} from "../src/service-spec.js";

type Manifest = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } } & Record<
  string,
  // biome-ignore lint/suspicious/noExplicitAny: rendered YAML, checked by the schemas below
  any
>;

/** The Kubernetes (and KEDA) schemas of every kind the manifests hold, from kubernetes-models. */
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  "v1/ConfigMap": ConfigMap,
  "v1/Service": Service,
  "apps/v1/Deployment": Deployment,
  "apps/v1/StatefulSet": StatefulSet,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
  "keda.sh/v1alpha1/ScaledObject": ScaledObject,
};

function validate(manifest: Manifest): void {
  const Model = MODELS[`${manifest.apiVersion}/${manifest.kind}`];
  if (!Model)
    throw new Error(`no schema for ${manifest.apiVersion} ${manifest.kind} (${manifest.metadata.name})`);
  new Model(manifest as never).validate();
}

/** `kustomize build`, offline: a kustomize binary, else kubectl's (infra/scripts/ensure-kubectl.sh installs one). */
function kustomizeBuild(dir: string): Manifest[] {
  const tools: [string, string[]][] = [
    ["kustomize", ["build", dir]],
    ["kubectl", ["kustomize", dir]],
  ];
  for (const [tool, args] of tools) {
    let out: string;
    try {
      out = execFileSync(tool, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") continue;
      throw err;
    }
    return parseAllDocuments(out).map((d) => d.toJS() as Manifest);
  }
  throw new Error("neither kustomize nor kubectl is on PATH: run infra/scripts/ensure-kubectl.sh");
}

const rendered = kustomizeBuild(join(REPO_ROOT, "deploy/k8s/overlays/production"));
const find = (kind: string, name: string) => {
  const m = rendered.find((o) => o.kind === kind && o.metadata.name === name);
  if (!m) throw new Error(`the overlay renders no ${kind} ${name}`);
  return m;
};
const envOf = (m: Manifest) =>
  Object.fromEntries(
    (m.spec.template.spec.containers[0].env as { name: string; value?: string }[]).map((e) => [e.name, e]),
  );

/** The command every deployment must start a service with: node, its own flags, TypeScript through tsx. */
const commandOf = (spec: ServiceSpec) => [
  "node",
  ...(spec.nodeFlags ?? []),
  "--import",
  "tsx",
  "--conditions=@drover/source",
  spec.entry,
];

describe("deploy/", () => {
  it("holds exactly what the service specs render (pnpm deploy:render)", () => {
    for (const [path, text] of Object.entries(renderDeployFiles())) {
      expect(readFileSync(join(REPO_ROOT, "deploy", path), "utf8"), `deploy/${path}`).toBe(text);
    }
  });

  it("renders with kustomize into objects that the Kubernetes and KEDA schemas accept", () => {
    expect(rendered.map((m) => `${m.kind}/${m.metadata.name}`).sort()).toEqual(
      [
        "ConfigMap/drover-nats-config",
        "ConfigMap/drover-settings",
        "Deployment/drover-coordinator",
        "Deployment/drover-dashboard",
        "Deployment/drover-receiver",
        "Deployment/drover-worker",
        "PodDisruptionBudget/drover-coordinator",
        "PodDisruptionBudget/drover-nats",
        "ScaledObject/drover-worker",
        "Service/drover-coordinator",
        "Service/drover-dashboard",
        "Service/drover-nats",
        "Service/drover-receiver",
        "StatefulSet/drover-nats",
      ].sort(),
    );
    for (const m of rendered) {
      expect(m.metadata.namespace).toBe(PRODUCTION.namespace);
      expect(() => validate(m), `${m.kind} ${m.metadata.name}`).not.toThrow();
    }
  });

  it("has a validation that refuses a wrong manifest", () => {
    const worker = structuredClone(find("Deployment", "drover-worker"));
    worker.spec.template.spec.terminationGracePeriodSeconds = "35s";
    expect(() => validate(worker)).toThrow(/terminationGracePeriodSeconds/);
    const scaled = structuredClone(find("ScaledObject", "drover-worker"));
    delete scaled.spec.scaleTargetRef;
    expect(() => validate(scaled)).toThrow(/scaleTargetRef/);
  });

  it("starts every container with the command, ports and probes of its service spec", () => {
    for (const spec of Object.values(SERVICES)) {
      const container = find("Deployment", `drover-${spec.name}`).spec.template.spec.containers[0];
      expect(container.command).toEqual(commandOf(spec));
      expect(container.ports.map((p: { containerPort: number }) => p.containerPort)).toEqual(
        spec.ports.map((p) => p.port),
      );
      for (const secret of spec.secrets)
        expect(envOf(find("Deployment", `drover-${spec.name}`))[secret]).toBeDefined();
    }
    const coordinator = find("Deployment", "drover-coordinator");
    expect(coordinator.spec.replicas).toBe(2);
    expect(coordinator.spec.template.spec.containers[0].readinessProbe.grpc).toEqual({ port: 50051 });
    expect(envOf(coordinator).DROVER_GRPC_ADDRESS!.value).toBe("0.0.0.0:50051");
    expect(find("PodDisruptionBudget", "drover-coordinator").spec.minAvailable).toBe(1);
  });

  it("gives a stopping worker longer than its drain, and scales workers on the queue consumer's backlog", () => {
    const worker = find("Deployment", "drover-worker");
    const graceMs = Number(envOf(worker).DROVER_SHUTDOWN_GRACE_MS!.value);
    expect(graceMs).toBe(WORKER.shutdownGraceMs);
    expect(worker.spec.template.spec.terminationGracePeriodSeconds * 1000).toBeGreaterThan(graceMs);
    expect(worker.spec.template.spec.terminationGracePeriodSeconds).toBe(terminationGraceSeconds(WORKER));
    expect(worker.spec.replicas).toBeUndefined();
    const trigger = find("ScaledObject", "drover-worker").spec.triggers[0];
    expect(trigger.type).toBe("nats-jetstream");
    expect(trigger.metadata).toMatchObject({ stream: "DROVER_TASKS", consumer: "drover-workers" });
    expect(find("ScaledObject", "drover-worker").spec.scaleTargetRef.name).toBe("drover-worker");
    expect(terminationGraceSeconds(COORDINATOR) * 1000).toBeGreaterThan(COORDINATOR.shutdownGraceMs);
  });

  it("runs NATS as three nodes that fsync every write, the stream at three replicas", () => {
    const nats = find("StatefulSet", "drover-nats");
    expect(nats.spec.replicas).toBe(3);
    const config = find("ConfigMap", "drover-nats-config").data["nats-server.conf"] as string;
    expect(config).toMatch(/jetstream \{[^}]*sync_interval: always/);
    expect(config.match(/nats-route:\/\//g)).toHaveLength(3);
    const settings = find("ConfigMap", "drover-settings").data;
    expect(settings.DROVER_STREAM_REPLICAS).toBe("3");
    expect(settings.NATS_URL.split(",")).toHaveLength(3);
    expect(find("PodDisruptionBudget", "drover-nats").spec.maxUnavailable).toBe(1);
  });

  it("composes the whole stack: three NATS nodes that fsync every write, Postgres, two coordinators, workers, the run page, the webhook receiver, a collector", () => {
    const compose = parse(readFileSync(join(REPO_ROOT, "deploy/compose.yaml"), "utf8")) as {
      services: Record<string, { command?: string[]; environment?: Record<string, string>; image: string }>;
    };
    expect(Object.keys(compose.services).sort()).toEqual(
      [
        "coordinator-1",
        "coordinator-2",
        "dashboard",
        "nats-1",
        "nats-2",
        "nats-3",
        "otel-collector",
        "postgres",
        "receiver",
        "worker",
      ].sort(),
    );
    const nats = readFileSync(join(REPO_ROOT, "deploy/nats/nats-server.conf"), "utf8");
    expect(nats).toMatch(/jetstream \{[^}]*sync_interval: always/);
    for (const node of ["nats-1", "nats-2", "nats-3"]) expect(nats).toContain(`nats-route://${node}:6222`);
    for (const spec of Object.values(SERVICES)) {
      const service = compose.services[spec.name === "coordinator" ? "coordinator-1" : spec.name]!;
      expect(service.command).toEqual(commandOf(spec));
    }
    expect(compose.services.worker!.environment!.DROVER_STREAM_REPLICAS).toBe("3");
  });
});
