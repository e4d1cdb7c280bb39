import type { SourceAdapter } from "../src/index.js";

/**
 * A source that follows the IETF RateLimit headers: the client's tests use it to show the client
 * itself knows no source's names.
 */
export const testAdapter: SourceAdapter = {
  authHeaders: (token) => ({ authorization: `Bearer ${token}` }),
  cost: (type) => (type === "list" ? 10 : 1),
  readBudget({ status, headers }, _cost, now) {
    const remaining = headers.get("ratelimit-remaining");
    const reset = headers.get("ratelimit-reset");
    const retryAfter = headers.get("retry-after");
    return {
      ...(remaining !== null ? { burstRemaining: Number(remaining) } : {}),
      ...(reset !== null ? { burstResetAt: now + Number(reset) * 1000 } : {}),
      ...(status === 429 && retryAfter !== null ? { blockedUntil: now + Number(retryAfter) * 1000 } : {}),
    };
  },
  throttledUntil: ({ status, body }, now) =>
    status === 403 && body.includes("slow down") ? now + 60_000 : undefined,
};
