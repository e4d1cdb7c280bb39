import { Server, ServerCredentials, type ServerOptions } from "@grpc/grpc-js";

export interface StartServerOptions {
  /** e.g. `0.0.0.0:50051`, or `127.0.0.1:0` for any free port. */
  address: string;
  /** Defaults to insecure (plaintext). */
  credentials?: ServerCredentials;
  serverOptions?: ServerOptions;
}

export interface RunningServer {
  server: Server;
  /** The bound port: the one asked for, or the one picked for `:0`. */
  port: number;
  /** Lets calls in flight finish for up to `graceMs` (default 5000), then cuts the rest off. */
  shutdown(graceMs?: number): Promise<void>;
}

/** Binds and starts a server; add services with `addService` before or after. */
export async function startServer(options: StartServerOptions): Promise<RunningServer> {
  const server = new Server(options.serverOptions);
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(
      options.address,
      options.credentials ?? ServerCredentials.createInsecure(),
      (err, bound) => (err ? reject(err) : resolve(bound)),
    );
  });
  return { server, port, shutdown: (graceMs = 5000) => shutdown(server, graceMs) };
}

function shutdown(server: Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    // Open server streams (WatchRun, health Watch) never end on their own, so grace must be bounded.
    const force = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(force);
      resolve();
    });
  });
}
