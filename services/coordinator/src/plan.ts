import type { Provider } from "@drover/provider-sdk";

/** Every kind a provider knows, in plan order. */
export function providerKinds(provider: Provider): string[] {
  return provider.phases.flat();
}

/**
 * The kinds a caller may ask for: every kind but the closing ones, which are passes of the
 * provider's own (the crm catch-up) that every run gets and that read nothing by themselves.
 */
export function userKinds(provider: Provider): string[] {
  const closing = provider.closingKinds ?? [];
  return providerKinds(provider).filter((k) => !closing.includes(k));
}

/**
 * The run's plan: the provider's phases filtered to the requested kinds, empty groups dropped,
 * plus the provider's closing kinds (a catch-up pass) whenever anything else is imported.
 * The plan is data frozen on the run, so a provider change never reshapes a run in flight.
 */
export function buildPlan(provider: Provider, kinds: readonly string[]): string[][] {
  const wanted = new Set(kinds.length > 0 ? kinds : providerKinds(provider));
  const closing = provider.closingKinds ?? [];
  if ([...wanted].some((k) => !closing.includes(k))) for (const k of closing) wanted.add(k);
  return provider.phases
    .map((group) => group.filter((k) => wanted.has(k)))
    .filter((group) => group.length > 0);
}
