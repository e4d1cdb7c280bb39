import { afterAll } from "vitest";
import { type Sandbox, type SandboxOptions, type SandboxRuntime, startSandbox } from "../src/index.js";

export const TOKEN = "test-token";

export type Json = Record<string, unknown>;

export interface ApiResponse {
  status: number;
  headers: Headers;
  text: string;
  body: Json;
}

const open: Sandbox[] = [];

afterAll(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

/** Starts a sandbox on a free port, closed automatically after the file's tests. */
export async function sandbox(options: SandboxOptions = {}, runtime: SandboxRuntime = {}): Promise<Sandbox> {
  const s = await startSandbox({ port: 0, ...options }, runtime);
  open.push(s);
  return s;
}

export async function get(s: Sandbox, path: string, token: string | null = TOKEN): Promise<ApiResponse> {
  const res = await fetch(`${s.url}${path}`, { headers: token === null ? {} : { "x-api-token": token } });
  const text = await res.text();
  let body: Json = {};
  if (res.headers.get("content-type")?.startsWith("application/json")) body = JSON.parse(text) as Json;
  return { status: res.status, headers: res.headers, text, body };
}

export interface Pagination {
  start: number;
  limit: number;
  more_items_in_collection: boolean;
  next_start?: number;
}

/** Where a v1 list says where it stands: under `pagination`, or flat (leads, a deal's mail). */
export const pagination = (r: ApiResponse): Pagination => {
  const additional = r.body.additional_data as (Pagination & { pagination?: Pagination }) | undefined;
  return additional?.pagination ?? (additional as Pagination);
};

/** Follows next_start until more_items_in_collection is false; returns every item in order. */
export async function walk(s: Sandbox, path: string, limit: number): Promise<Json[]> {
  const rows: Json[] = [];
  const sep = path.includes("?") ? "&" : "?";
  let start = 0;
  for (;;) {
    const r = await get(s, `${path}${sep}start=${start}&limit=${limit}`);
    if (r.status !== 200) throw new Error(`${path} start=${start}: ${r.status} ${r.text}`);
    rows.push(...((r.body.data as Json[] | null) ?? []));
    const p = pagination(r);
    if (!p.more_items_in_collection) return rows;
    if (p.next_start === undefined) throw new Error("more_items_in_collection without next_start");
    start = p.next_start;
  }
}

/** Follows a v2 list's next_cursor until it is null; returns every item in order. */
export async function walkCursor(s: Sandbox, path: string, limit: number): Promise<Json[]> {
  const rows: Json[] = [];
  const sep = path.includes("?") ? "&" : "?";
  let cursor: string | null = null;
  for (let pages = 0; pages < 10_000; pages++) {
    const r = await get(
      s,
      `${path}${sep}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
    );
    if (r.status !== 200) throw new Error(`${path}: ${r.status} ${r.text}`);
    rows.push(...((r.body.data as Json[] | null) ?? []));
    cursor = (r.body.additional_data as { next_cursor: string | null }).next_cursor;
    if (cursor === null) return rows;
  }
  throw new Error(`${path}: the cursor never ended`);
}
