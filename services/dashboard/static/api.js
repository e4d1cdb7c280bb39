// The dashboard's JSON API, called with the operator's key. The key stays in this tab
// (sessionStorage) and is dropped as soon as the dashboard refuses it.

const KEY_STORE = "drover.apiKey";

export const apiKey = () => sessionStorage.getItem(KEY_STORE);
export const storeKey = (key) => sessionStorage.setItem(KEY_STORE, key);
export const forgetKey = () => sessionStorage.removeItem(KEY_STORE);

/** A refusal by the dashboard: its HTTP status, its sentence, and the rest of its body. */
export class ApiError extends Error {
  constructor(status, message, body = {}) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

export async function api(method, path) {
  const res = await fetch(path, {
    method,
    headers: { authorization: `Bearer ${apiKey()}`, accept: "application/json" },
  });
  let body = {};
  try {
    body = await res.json();
  } catch {
    // An empty or broken body: the status says enough.
  }
  if (!res.ok) {
    if (res.status === 401) forgetKey();
    throw new ApiError(res.status, body.error || `The dashboard answered ${res.status}.`, body);
  }
  return body;
}

/** The API path of one run, or of one of its parts ("throughput", "stop", ...). */
export function runPath(runId, part) {
  return `/api/runs/${encodeURIComponent(runId)}${part ? `/${part}` : ""}`;
}
