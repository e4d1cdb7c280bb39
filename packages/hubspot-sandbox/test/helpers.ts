import { afterAll } from "vitest";
import { type HubSpotSandbox, type SandboxOptions, type SandboxRuntime, startSandbox } from "../src/index.js";

export const TOKEN = "pat-test-token";

export type Json = Record<string, unknown>;

export interface ApiResponse {
  status: number;
  headers: Headers;
  text: string;
  body: Json;
}

const open: HubSpotSandbox[] = [];

afterAll(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

/** Starts a sandbox on a free port, closed automatically after the file's tests. */
export async function sandbox(
  options: SandboxOptions = {},
  runtime: SandboxRuntime = {},
): Promise<HubSpotSandbox> {
  const s = await startSandbox({ port: 0, tenSecondLimit: 100_000, ...options }, runtime);
  open.push(s);
  return s;
}

async function answer(res: Response): Promise<ApiResponse> {
  const text = await res.text();
  const body = res.headers.get("content-type")?.startsWith("application/json")
    ? (JSON.parse(text) as Json)
    : {};
  return { status: res.status, headers: res.headers, text, body };
}

export async function get(s: HubSpotSandbox, path: string): Promise<ApiResponse> {
  return answer(await fetch(`${s.url}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } }));
}

export async function post(s: HubSpotSandbox, path: string, body: unknown): Promise<ApiResponse> {
  return answer(
    await fetch(`${s.url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    }),
  );
}

/** Follows `paging.next.after` from the first page to the end; returns every record in order. */
export async function walk(s: HubSpotSandbox, path: string): Promise<Json[]> {
  const rows: Json[] = [];
  const sep = path.includes("?") ? "&" : "?";
  let after: string | null = null;
  for (let pages = 0; pages < 100_000; pages++) {
    const r = await get(s, `${path}${after === null ? "" : `${sep}after=${after}`}`);
    if (r.status !== 200) throw new Error(`${path}: ${r.status} ${r.text}`);
    rows.push(...(r.body.results as Json[]));
    const next = (r.body.paging as { next?: { after: string } } | undefined)?.next;
    if (!next) return rows;
    after = next.after;
  }
  throw new Error(`${path}: the cursor never ended`);
}
