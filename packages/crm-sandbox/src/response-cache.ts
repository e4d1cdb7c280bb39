/**
 * The JSON text of API answers already rendered, by request and dataset version. Every row is a
 * pure function of the seed, the options and the rounds of changes applied (dataset.ts), so an
 * answer is the same text until the next round: rendering and stringifying a 500-row page again
 * cost ~27 ms of CPU each time, on the cores the engine under test shares with the sandbox (a
 * re-run or a verification reads every page again). Faults, limits and counters are decided per
 * request before the cache is asked, and headers are never cached: only the body is.
 */
export class ResponseCache {
  private readonly answers = new Map<string, { status: number; text: string }>();
  private bytes = 0;

  constructor(private readonly maxBytes: number) {}

  /** The cached answer, or `render`'s (stored unless larger than the whole budget). */
  answer(key: string, render: () => { status: number; body: unknown }): { status: number; text: string } {
    const cached = this.answers.get(key);
    if (cached) return cached;
    const { status, body } = render();
    const fresh = { status, text: JSON.stringify(body) };
    if (this.maxBytes <= 0 || fresh.text.length > this.maxBytes) return fresh;
    // Oldest first (a Map keeps insertion order): a walk that outgrew the budget drops its start.
    for (const [k, v] of this.answers) {
      if (this.bytes + fresh.text.length <= this.maxBytes) break;
      this.answers.delete(k);
      this.bytes -= v.text.length;
    }
    this.answers.set(key, fresh);
    this.bytes += fresh.text.length;
    return fresh;
  }

  /** A round of changes was applied: nothing rendered before it is what the API answers now. */
  clear(): void {
    this.answers.clear();
    this.bytes = 0;
  }
}

/** A request's identity for the cache: its path and its query, sorted, without the token. */
export function requestKey(method: string, url: URL): string {
  const params = [...url.searchParams].filter(([k]) => k !== "api_token");
  params.sort(([a, x], [b, y]) => (a < b ? -1 : a > b ? 1 : x < y ? -1 : x > y ? 1 : 0));
  return `${method} ${url.pathname}?${new URLSearchParams(params).toString()}`;
}
