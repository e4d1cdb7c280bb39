const pad = (n: number): string => String(n).padStart(2, "0");

/** Pipedrive v1 timestamp: "YYYY-MM-DD HH:MM:SS", UTC. */
export function formatDateTime(ms: number): string {
  const d = new Date(ms);
  return `${formatDate(ms)} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
}

/** Pipedrive v1 date: "YYYY-MM-DD", UTC. */
export function formatDate(ms: number): string {
  const d = new Date(ms);
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
}

const RFC_3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i;

/** A query's date-time parameter in ms; null when absent; a string saying what is wrong when malformed. */
export function parseTime(query: URLSearchParams, name: string): number | null | string {
  const raw = query.get(name);
  if (raw === null) return null;
  const ms = RFC_3339.test(raw) ? Date.parse(raw) : Number.NaN;
  return Number.isNaN(ms) ? `${name} must be an RFC 3339 date-time, e.g. 2025-01-01T10:20:00Z` : ms;
}
