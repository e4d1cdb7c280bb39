import {
  type AddServiceOptions,
  type AnyService,
  addService,
  type Client,
  type ClientOptions,
  createClient,
  type RunningServer,
  type ServiceImplementation,
  startServer,
} from "../src/index.js";

export interface Harness<S extends AnyService> {
  client: Client<S>;
  running: RunningServer;
  address: string;
  close(): Promise<void>;
}

/** A real server on a free loopback port with one service, and a client for it. */
export async function serve<S extends AnyService>(
  desc: S,
  implementation: ServiceImplementation<S>,
  options: { server?: AddServiceOptions; client?: ClientOptions } = {},
): Promise<Harness<S>> {
  const running = await startServer({ address: "127.0.0.1:0" });
  addService(running.server, desc, implementation, options.server);
  const address = `127.0.0.1:${running.port}`;
  const client = createClient(desc, address, options.client);
  return {
    client,
    running,
    address,
    async close() {
      client.close();
      await running.shutdown(200);
    },
  };
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}

/** Polls until the condition holds: server-side effects of a cancel arrive asynchronously. */
export async function eventually(condition: () => boolean, timeoutMs = 2000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > until) throw new Error("condition not met in time");
    await sleep(10);
  }
}
