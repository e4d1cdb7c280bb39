import type { Client, RunService } from "@drover/proto";

/** The coordinator the dashboard calls on the operator's behalf. */
export interface Coordinator {
  client: Client<typeof RunService>;
  /** As configured, for sentences that tell the operator which coordinator did not answer. */
  address: string;
}

const CALL_DEADLINE_MS = 15_000;

/** Every call carries the operator's key as its bearer token: the coordinator's scopes decide. */
export function callOptions(token: string, signal?: AbortSignal) {
  return {
    metadata: { authorization: `Bearer ${token}` },
    deadline: new Date(Date.now() + CALL_DEADLINE_MS),
    ...(signal ? { signal } : {}),
  };
}
