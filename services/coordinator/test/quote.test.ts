import { describe, expect, it } from "vitest";
import { quoted } from "../src/quote.js";

describe("a caller's value quoted in an error message", () => {
  it("escapes every control character, DEL, C1 controls and Unicode line breaks, and cuts it short", () => {
    const nasty = "a\u0000b\u001b[31mc\r\nd\u007fe\u0085f\u009bg\u2028h\u2029i";
    const q = quoted(nasty);
    expect(q).toBe(String.raw`"a\u0000b\u001b[31mc\r\nd\u007fe\u0085f\u009bg\u2028h\u2029i"`);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: asserting none got through
    expect(q).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/);
    expect(quoted("x".repeat(100), 64)).toBe(`"${"x".repeat(64)}"`);
    expect(quoted('say "hi"')).toBe(String.raw`"say \"hi\""`);
  });
});
