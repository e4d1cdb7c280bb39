/**
 * Figures measured in rounds on a shared machine. One round compares one contender's luck with
 * another's; so does each contender's fastest round (a lucky round of one beside an ordinary round
 * of the other). A figure is taken within each round and the median of the rounds is printed, with
 * their spread beside it, and each round runs the contenders in a turned order, so that none always
 * runs first (warm caches) or last (the previous contender's checkpoint).
 */

/** The median of per-round values (the mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new Error("median of no values");
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The contenders of round `round`: as listed in the first, each later round turned by one more place. */
export function roundOrder<T>(contenders: readonly T[], round: number): T[] {
  const turn = round % contenders.length;
  return [...contenders.slice(turn), ...contenders.slice(0, turn)];
}

/** Per round, `num`'s rate against `den`'s, from each side's seconds in that round. */
export function ratiosByRound(numSeconds: readonly number[], denSeconds: readonly number[]): number[] {
  if (numSeconds.length !== denSeconds.length)
    throw new Error(`rounds differ: ${numSeconds.length} against ${denSeconds.length}`);
  return numSeconds.map((seconds, i) => denSeconds[i]! / seconds);
}

/** A figure measured in rounds as the JSON report keeps it: its lowest and highest round, and how many. */
export interface Spread {
  min: number;
  max: number;
  rounds: number;
}

/** The spread of per-round values; undefined for a figure of one measurement (nothing to spread). */
export function spreadRange(values: readonly number[] | undefined): Spread | undefined {
  if (!values || values.length < 2) return undefined;
  return { min: Math.min(...values), max: Math.max(...values), rounds: values.length };
}

/**
 * What is printed beside a figure measured in rounds: the lowest and the highest round and how many
 * there were, e.g. ` (rounds 0.781–0.842 of 3)`; nothing for a figure of one measurement.
 */
export function spreadOf(values: readonly number[] | undefined, format: (v: number) => string): string {
  const spread = spreadRange(values);
  if (!spread) return "";
  return ` (rounds ${format(spread.min)}–${format(spread.max)} of ${spread.rounds})`;
}
