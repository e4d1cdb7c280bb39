/**
 * The time component of a ULID: its first 10 characters are the 48-bit millisecond timestamp in
 * Crockford base32, most significant first, so ULIDs sort by time as strings. A slot's bounds are
 * ULID strings `<time>0000000000000000`: every ULID minted in [from, to) is >= the lower bound and
 * < the upper one, so no row falls in two slots and none falls between two adjacent slots.
 */

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const TIME_CHARS = 10;
const RANDOM_CHARS = 16;
export const MAX_ULID_TIME = 2 ** 48 - 1;

export function encodeUlidTime(ms: number): string {
  if (!Number.isInteger(ms) || ms < 0 || ms > MAX_ULID_TIME) throw new RangeError(`${ms} is not a ULID time`);
  let out = "";
  let t = ms;
  for (let i = 0; i < TIME_CHARS; i++) {
    out = CROCKFORD[t % 32]! + out;
    t = Math.floor(t / 32);
  }
  return out;
}

export function decodeUlidTime(ulid: string): number {
  let t = 0;
  for (const ch of ulid.slice(0, TIME_CHARS).toUpperCase()) {
    const v = CROCKFORD.indexOf(ch);
    if (v < 0) throw new RangeError(`"${ulid}" is not a ULID`);
    t = t * 32 + v;
  }
  return t;
}

/** The smallest ULID of millisecond `ms`: the lower bound of a slot starting then. */
export function ulidFloor(ms: number): string {
  return encodeUlidTime(ms) + "0".repeat(RANDOM_CHARS);
}

/** A ULID for `ms` with the given randomness (26 characters); the generator and tests mint them. */
export function makeUlid(ms: number, random: () => number = Math.random): string {
  let tail = "";
  for (let i = 0; i < RANDOM_CHARS; i++) tail += CROCKFORD[Math.floor(random() * 32)];
  return encodeUlidTime(ms) + tail;
}
