// Numbers, times and durations as the page writes them.

export const fmt = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));
export const when = (iso) => (iso ? new Date(iso).toLocaleString() : "–");

export function duration(seconds) {
  if (!Number.isFinite(seconds) || seconds < 0) return "–";
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

/** A wait as a person says it, as the CLI does: "45 s", "12 m", "3 h 12 m", "2 d 5 h". */
export function waitText(seconds) {
  const s = Math.max(1, Math.ceil(seconds));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} m`;
  const hours = Math.floor(m / 60);
  if (hours < 24) return m % 60 ? `${hours} h ${m % 60} m` : `${hours} h`;
  const days = Math.floor(hours / 24);
  return hours % 24 ? `${days} d ${hours % 24} h` : `${days} d`;
}

/** The time of day in the reader's time zone, with the date in front when it is not today's. */
export function localTime(iso, timeZone) {
  const at = new Date(iso);
  if (timeZone) {
    // A day's reset, said in the account's own time zone; the date only when it is over a day off.
    const time = at.toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit", timeZone });
    const within = at.getTime() - Date.now() < 86_400_000;
    return `${within ? time : `${at.toLocaleDateString([], { timeZone })} ${time}`} ${timeZone}`;
  }
  const time = at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  return at.toDateString() === new Date().toDateString() ? time : `${at.toLocaleDateString()} ${time}`;
}
