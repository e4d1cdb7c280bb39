import type { Provider } from "@drover/provider-sdk";
import { InvalidInput } from "./domain-errors.js";
import { providerKinds, userKinds } from "./plan.js";
import { quoted } from "./quote.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const TENANT = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;
// C0 controls and DEL: never meaningful in a name, and NUL is refused by Postgres itself.
// biome-ignore lint/suspicious/noControlCharactersInRegex: that is the point
const CONTROL = /[\u0000-\u001f\u007f]/;

function invalid(message: string): InvalidInput {
  return new InvalidInput(message);
}

export function requireRunId(value: string): string {
  if (!value) throw invalid("run_id is required");
  if (!UUID.test(value)) throw invalid(`run_id must be a UUID, got ${quoted(value)}`);
  return value.toLowerCase();
}

export function requireTenant(value: string): string {
  if (!value) throw invalid("tenant_id is required");
  if (!TENANT.test(value)) {
    throw invalid(
      "tenant_id must be 1-128 characters of letters, digits, '_', '.', ':' or '-', starting with a letter or digit",
    );
  }
  return value;
}

export function requireText(field: string, value: string, max: number): string {
  if (!value.trim()) throw invalid(`${field} is required`);
  return optionalText(field, value, max);
}

export function optionalText(field: string, value: string, max: number): string {
  if (value.length > max) throw invalid(`${field} is longer than ${max} characters`);
  if (CONTROL.test(value)) throw invalid(`${field} holds control characters`);
  return value;
}

/**
 * A credential: bounded, printable, and never quoted back, not even in part (the message names the
 * field only). Control characters would also let it smuggle headers into the source request.
 */
export function requireToken(field: string, value: string, max: number): string {
  if (value.length > max) throw invalid(`${field} is longer than ${max} characters`);
  if (CONTROL.test(value)) throw invalid(`${field} holds control characters`);
  return value;
}

/**
 * The kinds a StartRun asks for, each one a user kind of the provider (plan.ts): a closing kind such
 * as the crm's catch-up is refused with the allowed kinds named, since a run of it alone would
 * succeed having read nothing. Empty means every user kind; duplicates are dropped.
 */
export function requireUserKinds(provider: Provider, kinds: readonly string[]): string[] {
  const allowed = userKinds(provider);
  if (kinds.length === 0) return allowed;
  const named = `allowed kinds: ${allowed.join(", ")}`;
  if (kinds.length > allowed.length)
    throw invalid(`kinds lists ${kinds.length} kinds; ${provider.name} has ${allowed.length}`);
  const closing = kinds.filter((k) => provider.closingKinds?.includes(k));
  if (closing.length > 0)
    throw invalid(
      `${closing.map((k) => `"${k}"`).join(", ")} is a pass every ${provider.name} run gets by itself, not a kind to ask for; ${named}`,
    );
  const unknown = kinds.filter((k) => !allowed.includes(k));
  if (unknown.length > 0)
    throw invalid(
      `unknown kind(s) ${unknown.map((k) => quoted(k)).join(", ")} for source ${provider.name}; ${named}`,
    );
  return [...new Set(kinds)];
}

/** The provider a request names; INVALID_ARGUMENT naming the known sources otherwise. */
export function requireProvider(providers: ReadonlyMap<string, Provider>, name: string): Provider {
  const p = providers.get(name);
  if (!p) throw invalid(`unknown source ${quoted(name)}; known sources: ${[...providers.keys()].join(", ")}`);
  return p;
}

/**
 * A kind ExplainRecord may ask about: one the provider has, so a typo is refused with the kinds
 * named rather than answered "never reached the ledger".
 */
export function requireKnownKind(provider: Provider, kind: string): string {
  const known = providerKinds(provider);
  if (!known.includes(kind))
    throw invalid(
      `unknown kind ${quoted(kind)} for source ${provider.name}; its kinds: ${userKinds(provider).join(", ")}`,
    );
  return kind;
}

const MAX_SETTINGS = 32;

/** A string map from the caller: a bounded number of short keys and values. */
export function requireSettings(field: string, settings: Record<string, string>): Record<string, string> {
  const entries = Object.entries(settings);
  if (entries.length > MAX_SETTINGS) throw invalid(`${field} has more than ${MAX_SETTINGS} entries`);
  for (const [key, value] of entries) {
    requireText(`${field} key`, key, 64);
    optionalText(`${field}.${key.slice(0, 64)}`, value, 1024);
  }
  return settings;
}

export { invalid };
