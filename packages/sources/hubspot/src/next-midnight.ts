/** Building a formatter loads the zone's rules (most of its cost): one per time zone and process. */
const wallClocks = new Map<string, Intl.DateTimeFormat>();

function wallClock(timeZone: string): Intl.DateTimeFormat {
  let format = wallClocks.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat("en-US", {
      timeZone,
      hourCycle: "h23",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    wallClocks.set(timeZone, format);
  }
  return format;
}

/**
 * The first midnight after `now` on the wall clock of `timeZone`: when a HubSpot account's daily
 * allowance is whole again ("daily limits reset at midnight based on your time zone setting").
 */
export function nextMidnight(now: number, timeZone: string): number {
  const parts = wallClock(timeZone).formatToParts(new Date(now));
  const part = (type: string) => Number(parts.find((p) => p.type === type)?.value ?? 0);
  const sinceMidnight = ((part("hour") * 60 + part("minute")) * 60 + part("second")) * 1000 + (now % 1000);
  return now - sinceMidnight + 86_400_000;
}
