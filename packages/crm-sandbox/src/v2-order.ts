import type { Dataset, RowKind } from "./dataset.js";

export const SORT_KEYS = ["id", "update_time", "add_time"] as const;
export type SortBy = (typeof SORT_KEYS)[number];

/** A kind's ids in ascending (key, id) order, with each position's key beside it. */
export interface Ordering {
  ids: Int32Array;
  keys: Float64Array;
}

/**
 * Times are pure functions of the id, but not monotonic in it, so a time-sorted list needs every
 * row's key: computed once per (dataset, kind, key) and kept until the change set moves keys or adds rows.
 */
const cache = new WeakMap<Dataset, Map<string, { changedAtMs: number | null; ordering: Ordering }>>();

export function keyOf(ds: Dataset, kind: RowKind, sortBy: SortBy, id: number): number {
  if (sortBy === "update_time") return ds.updateTimeMs(kind, id);
  if (sortBy === "add_time") return ds.addTimeMsOf(kind, id);
  return id;
}

export function ordering(ds: Dataset, kind: RowKind, sortBy: SortBy): Ordering {
  let perDataset = cache.get(ds);
  if (!perDataset) {
    perDataset = new Map();
    cache.set(ds, perDataset);
  }
  const cacheKey = `${kind}/${sortBy}`;
  const hit = perDataset.get(cacheKey);
  if (hit && hit.changedAtMs === ds.changedAtMs) return hit.ordering;
  const n = ds.count(kind);
  const byId = new Float64Array(n + 1);
  const ids = new Int32Array(n);
  for (let id = 1; id <= n; id++) {
    byId[id] = keyOf(ds, kind, sortBy, id);
    ids[id - 1] = id;
  }
  ids.sort((a, b) => (byId[a] as number) - (byId[b] as number) || a - b);
  const keys = new Float64Array(n);
  for (let i = 0; i < n; i++) keys[i] = byId[ids[i] as number] as number;
  const result = { ids, keys };
  perDataset.set(cacheKey, { changedAtMs: ds.changedAtMs, ordering: result });
  return result;
}

/** Compares (key, id) pairs the way the ordering sorts them. */
const compare = (k1: number, i1: number, k2: number, i2: number): number => k1 - k2 || i1 - i2;

/** The first position whose (key, id) is greater than the given pair: where an ascending walk resumes. */
export function firstAfter(o: Ordering, key: number, id: number): number {
  let lo = 0;
  let hi = o.ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compare(o.keys[mid] as number, o.ids[mid] as number, key, id) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
