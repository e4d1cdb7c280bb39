/**
 * Delay before a transient failure's next attempt: exponential from 2 s, capped at 5 min, with
 * jitter so tasks that failed together (a source outage) do not return together.
 */
export function retryDelayMs(attempts: number, random: () => number = Math.random): number {
  const base = Math.min(2_000 * 2 ** Math.max(0, attempts - 1), 300_000);
  return Math.round(base * (0.75 + random() * 0.5));
}
