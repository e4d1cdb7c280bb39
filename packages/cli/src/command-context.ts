import type { Client, DescMessage, MessageShape, RunService } from "@drover/proto";

export interface Io {
  out(text: string): void;
  err(text: string): void;
  isTty: boolean;
  /** The terminal's width when output goes to one (read at each redraw: it may be resized). */
  readonly columns?: number;
}

export class UsageError extends Error {}

export type Flags = Record<string, string | boolean | string[] | undefined>;

/** What one command is given: the parsed command line, the coordinator's client, and where to print. */
export interface CommandContext {
  readonly client: Client<typeof RunService>;
  readonly io: Io;
  readonly env: NodeJS.ProcessEnv;
  readonly flags: Flags;
  readonly positionals: string[];
  /** --json: print the RPC's response as that message's JSON instead of the human text. */
  readonly json: boolean;
  /** The width tables fit, or undefined when output goes to a file or a pipe (nothing is cut). */
  readonly width: number | undefined;
  /** Prints the human text, or with --json the response of the RPC the command called. */
  print<Desc extends DescMessage>(human: string, schema: Desc, response: MessageShape<Desc>): void;
}

/** One CLI command: it prints what it did and returns the process exit code. */
export type Command = (context: CommandContext) => Promise<number>;

export function one(positionals: string[], what: string): string {
  if (positionals.length !== 1) throw new UsageError(`expected exactly one ${what}`);
  return positionals[0]!;
}

export function need(flags: Flags, name: string): string {
  const v = flags[name];
  if (typeof v !== "string" || v === "") throw new UsageError(`--${name} is required`);
  return v;
}

/** `--limit`: how many rows a listing asks for, `fallback` when not given. */
export function pageLimit(flags: Flags, fallback: number): number {
  const limit = typeof flags.limit === "string" ? Number(flags.limit) : fallback;
  if (!Number.isInteger(limit) || limit < 1 || limit > 500)
    throw new UsageError("--limit must be a whole number from 1 to 500");
  return limit;
}
