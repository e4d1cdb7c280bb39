import { describe, expect, it } from "vitest";
import { ConfigError, NATS_SETTINGS, parseEnv, z } from "../src/index.js";

const service = z.object({ ...NATS_SETTINGS });

const problemsOf = (env: NodeJS.ProcessEnv): string[] => {
  try {
    parseEnv(service, env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
};

describe("NATS settings", () => {
  it("default to one local server keeping one replica", () => {
    expect(parseEnv(service, {})).toEqual({ NATS_URL: ["127.0.0.1:4222"], DROVER_STREAM_REPLICAS: 1 });
  });

  it("read a cluster's comma-separated server list, spaces and URLs allowed", () => {
    expect(
      parseEnv(service, {
        NATS_URL: "nats-1:4222, nats://nats-2:4222,tls://nats-3,[::1]:4223",
        DROVER_STREAM_REPLICAS: "3",
      }),
    ).toEqual({
      NATS_URL: ["nats-1:4222", "nats://nats-2:4222", "tls://nats-3", "[::1]:4223"],
      DROVER_STREAM_REPLICAS: 3,
    });
  });

  it("name each entry of the list that is not a server, and a server listed twice", () => {
    expect(problemsOf({ NATS_URL: "nats-1:4222,,nats-2" })).toEqual([
      'NATS_URL: must be host:port or nats://host:port, comma-separated for a cluster (e.g. nats-1:4222,nats-2:4222,nats-3:4222); not a server: "", "nats-2" (got "nats-1:4222,,nats-2")',
    ]);
    expect(problemsOf({ NATS_URL: "http://nats-1:4222" })[0]).toContain('not a server: "http://nats-1:4222"');
    expect(problemsOf({ NATS_URL: "a:4222,b:4222,a:4222" })).toEqual([
      'NATS_URL: lists a:4222 more than once (got "a:4222,b:4222,a:4222")',
    ]);
  });

  it("refuse a replica count JetStream cannot keep", () => {
    expect(problemsOf({ DROVER_STREAM_REPLICAS: "0" })).toEqual([
      'DROVER_STREAM_REPLICAS: must be at least 1 (got "0")',
    ]);
    expect(problemsOf({ DROVER_STREAM_REPLICAS: "7" })).toEqual([
      'DROVER_STREAM_REPLICAS: must be at most 5 (got "7")',
    ]);
    expect(problemsOf({ DROVER_STREAM_REPLICAS: "three" })).toEqual([
      'DROVER_STREAM_REPLICAS: must be a number (got "three")',
    ]);
  });
});
