const UNESCAPED_BY_JSON = /[\u007f-\u009f\u2028\u2029]/g;

/**
 * A caller's value as an error message quotes it: cut to `max` characters and in double quotes, with
 * control characters escaped (`\n`, `\u001b`) rather than sent raw, so a message shown in a terminal,
 * a log line or the run page cannot carry escape sequences or forged line breaks.
 */
export function quoted(value: string, max = 64): string {
  return JSON.stringify(value.slice(0, max)).replace(
    UNESCAPED_BY_JSON,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}
