import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const PACKAGE_DIR = fileURLToPath(new URL("..", import.meta.url));

function run(args: string[]): ChildProcess {
  return spawn(process.execPath, ["--import", "tsx", "--conditions=@drover/source", "src/main.ts", ...args], {
    cwd: PACKAGE_DIR,
    stdio: ["ignore", "pipe", "pipe"],
  });
}

async function firstLine(child: ChildProcess): Promise<string> {
  let buffered = "";
  for await (const chunk of child.stdout as AsyncIterable<Buffer>) {
    buffered += chunk.toString();
    const newline = buffered.indexOf("\n");
    if (newline !== -1) return buffered.slice(0, newline);
  }
  throw new Error(`exited before printing a line: ${buffered}`);
}

describe("hubspot-sandbox CLI", () => {
  it("prints one listening line, serves the dataset its flags ask for and exits 0 on SIGTERM", async () => {
    const child = run([
      "--port",
      "0",
      "--seed",
      "3",
      "--contacts",
      "7",
      "--archived-rate",
      "0",
      "--latency-ms",
      "1",
    ]);
    const line = JSON.parse(await firstLine(child)) as { event: string; url: string; port: number };
    expect(line.event).toBe("listening");
    expect(line.url).toBe(`http://127.0.0.1:${line.port}`);
    const res = await fetch(`${line.url}/crm/v3/objects/contacts?limit=100`, {
      headers: { authorization: "Bearer t" },
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { results: unknown[] }).results).toHaveLength(7);
    child.kill("SIGTERM");
    const [code] = await once(child, "exit");
    expect(code).toBe(0);
  }, 15_000);

  it("exits 2 with a message naming the bad flag", async () => {
    const child = run(["--archived-rate", "2"]);
    let stderr = "";
    child.stderr?.on("data", (c: Buffer) => {
      stderr += c.toString();
    });
    const [code] = await once(child, "exit");
    expect(code).toBe(2);
    expect(stderr).toContain("archivedRate: expected a number in [0, 1], got 2");
  }, 15_000);
});
