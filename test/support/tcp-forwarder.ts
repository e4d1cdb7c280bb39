import { createConnection, createServer, type Socket } from "node:net";

/**
 * A userspace TCP forwarder: listens on `host` (a veth address the namespaced process can reach)
 * and pipes each connection to `target` (a service that listens on loopback only, as Postgres and
 * NATS do here). It adds no timeouts of its own: when the link is cut its sockets just stop
 * hearing from the other side, as a router would, and the services' own deadlines decide.
 */
export interface TcpForwarder {
  /** host:port to give the namespaced process. */
  address: string;
  port: number;
  close(): Promise<void>;
}

export async function startTcpForwarder(
  host: string,
  target: { host: string; port: number },
): Promise<TcpForwarder> {
  const open = new Set<Socket>();
  const server = createServer((inbound) => {
    const outbound = createConnection(target);
    open.add(inbound);
    open.add(outbound);
    const end = () => {
      inbound.destroy();
      outbound.destroy();
      open.delete(inbound);
      open.delete(outbound);
    };
    inbound.on("error", end).on("close", end);
    outbound.on("error", end).on("close", end);
    inbound.pipe(outbound);
    outbound.pipe(inbound);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, host, () => resolve());
  });
  const { port } = server.address() as { port: number };
  return {
    address: `${host}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}
