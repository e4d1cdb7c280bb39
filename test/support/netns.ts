import { execFile } from "node:child_process";
import { randomBytes, randomInt } from "node:crypto";
import { promisify } from "node:util";

const run = promisify(execFile);

/**
 * A host of its own on this machine: a network namespace joined to the root namespace by a veth
 * pair, /30 addresses on both ends. A process started with `launcher` runs inside and reaches the
 * root namespace only through the veth (host address); `cut()` takes the link down inside the
 * namespace, as a failed switch port would: established connections stay open on both sides and
 * hear nothing until `heal()`. Needs root and a kernel that allows namespaces (see netnsProblem).
 * All traffic stays on this machine: both ends are interfaces this test made.
 */
export interface IsolatedHost {
  name: string;
  /** The root namespace's end: services the host must reach are forwarded here. */
  hostAddress: string;
  /** The namespace's end: services inside listen here for the root namespace. */
  guestAddress: string;
  /** Prefix of a command that runs inside the namespace. */
  launcher: string[];
  cut(): Promise<void>;
  heal(): Promise<void>;
  readonly isCut: boolean;
  close(): Promise<void>;
}

async function ip(...args: string[]): Promise<void> {
  await run("ip", args);
}

/** Why namespaces cannot be made here, or undefined when they can (tried with a throwaway one). */
export async function netnsProblem(): Promise<string | undefined> {
  if (process.platform !== "linux") return `network namespaces are Linux only (this is ${process.platform})`;
  const probe = `drover-probe-${randomBytes(3).toString("hex")}`;
  try {
    await ip("netns", "add", probe);
  } catch (err) {
    const { stderr, message } = err as { stderr?: string; message: string };
    return `\`ip netns add\` is not allowed here (${(stderr || message).trim()}); it needs root and a kernel that allows network namespaces`;
  }
  await ip("netns", "del", probe).catch(() => {});
  return undefined;
}

export async function startIsolatedHost(): Promise<IsolatedHost> {
  const id = randomBytes(3).toString("hex");
  const name = `drover-${id}`;
  // Interface names are limited to 15 characters.
  const hostSide = `drv${id}h`;
  const guestSide = `drv${id}g`;
  // A random /30 in 10.213.0.0/16: two test files at once rarely pick the same, and a clash fails loudly.
  const block = randomInt(0, 16_384) * 4;
  const hostAddress = `10.213.${block >> 8}.${(block & 255) + 1}`;
  const guestAddress = `10.213.${block >> 8}.${(block & 255) + 2}`;
  let cut = false;
  await ip("netns", "add", name);
  try {
    await ip("link", "add", hostSide, "type", "veth", "peer", "name", guestSide);
    await ip("link", "set", guestSide, "netns", name);
    await ip("addr", "add", `${hostAddress}/30`, "dev", hostSide);
    await ip("link", "set", hostSide, "up");
    await ip("-n", name, "addr", "add", `${guestAddress}/30`, "dev", guestSide);
    await ip("-n", name, "link", "set", guestSide, "up");
    await ip("-n", name, "link", "set", "lo", "up");
  } catch (err) {
    await ip("link", "del", hostSide).catch(() => {});
    await ip("netns", "del", name).catch(() => {});
    throw err;
  }
  return {
    name,
    hostAddress,
    guestAddress,
    launcher: ["ip", "netns", "exec", name],
    get isCut() {
      return cut;
    },
    async cut() {
      await ip("-n", name, "link", "set", guestSide, "down");
      cut = true;
    },
    async heal() {
      await ip("-n", name, "link", "set", guestSide, "up");
      cut = false;
    },
    async close() {
      // Deleting one end of a veth deletes both; the namespace goes once no process is left in it.
      await ip("link", "del", hostSide).catch(() => {});
      await ip("netns", "del", name).catch(() => {});
    },
  };
}
