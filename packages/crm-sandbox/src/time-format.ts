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
