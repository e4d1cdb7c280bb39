/** Small seeded generator; quality is ample for fake CRM data and it is cheap to create per row. */
export function mulberry32(state: number): () => number {
  let a = state | 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

const streamIds = new Map<string, number>();

/** FNV-1a of the stream name, memoised because the same few names are hashed millions of times. */
function streamId(stream: string): number {
  let id = streamIds.get(stream);
  if (id === undefined) {
    id = 0x811c9dc5;
    for (let i = 0; i < stream.length; i++) id = Math.imul(id ^ stream.charCodeAt(i), 0x01000193);
    id >>>= 0;
    streamIds.set(stream, id);
  }
  return id;
}

/**
 * Hash of (seed, stream, index). Every row attribute draws from its own stream so that row i can be
 * built without building rows 0..i-1, and so that changing one knob (say malformedRate) leaves the
 * content of every other attribute untouched.
 */
export function hash3(seed: number, stream: string, index: number): number {
  let h = fmix(seed ^ 0x9e3779b9);
  h = fmix(h ^ streamId(stream));
  h = fmix(h ^ (index >>> 0));
  // Indexes above 2^32 (huge deleted-id ranges) still get distinct hashes.
  return fmix(h ^ Math.floor(index / 4294967296));
}

/** Uniform in [0, 1), fixed for (seed, stream, index). */
export function unit(seed: number, stream: string, index: number): number {
  return hash3(seed, stream, index) / 4294967296;
}

export class Rng {
  private readonly next: () => number;

  constructor(seed: number, stream: string, index: number) {
    this.next = mulberry32(hash3(seed, stream, index));
  }

  float(): number {
    return this.next();
  }

  /** Integer in [min, max], both inclusive. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)] as T;
  }

  hex(length: number): string {
    let out = "";
    while (out.length < length)
      out += Math.floor(this.next() * 0x10000)
        .toString(16)
        .padStart(4, "0");
    return out.slice(0, length);
  }
}
