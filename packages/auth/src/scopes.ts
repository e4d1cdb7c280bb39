/**
 * What a credential may do. Scopes:
 * - `admin`: everything, for every tenant;
 * - `worker`: the internal WorkerService only;
 * - `read:<id>`: read one tenant's runs (get, list, watch, notes, explain, throughput, audit);
 * - `tenant:<id>`: read and steer one tenant's runs (start, stop, resume, retry, complete, verify),
 *   but NOT revert them: a revert deletes what a run imported into the product;
 * - `revert:<id>`: read one tenant's runs and revert them, with or without force. An operator who
 *   may do both holds `tenant:<id>+revert:<id>`.
 * The tenant id comes last in each, after the first ':', because tenant ids may hold ':' themselves.
 */
export type Scope = { kind: "admin" } | { kind: "worker" } | { kind: TenantScopeKind; tenantId: string };

type TenantScopeKind = "read" | "tenant" | "revert";
const TENANT_SCOPE_KINDS: readonly TenantScopeKind[] = ["read", "tenant", "revert"];

/** What a RunService method needs of the caller, for the tenant it touches. */
export type Capability = "read" | "steer" | "revert";

/** Which capabilities each tenant scope grants; `admin` has them all, everywhere. */
const GRANTS: Readonly<Record<TenantScopeKind, readonly Capability[]>> = {
  read: ["read"],
  tenant: ["read", "steer"],
  revert: ["read", "revert"],
};

/** Who is calling: the key that authenticated the call, never the token itself. */
export interface Principal {
  keyId: string;
  scopes: readonly Scope[];
}

/** The same rule as tenant ids at the API's edge. */
const TENANT_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

const SCOPE_NAMES = "admin, worker, read:<tenant id>, tenant:<tenant id> and revert:<tenant id>";

export class ScopeError extends Error {
  override readonly name = "ScopeError";
}

/** `admin`, `worker`, `read:<id>`, `tenant:<id>` or `revert:<id>`. */
export function parseScope(text: string): Scope {
  const value = text.trim();
  if (value === "admin") return { kind: "admin" };
  if (value === "worker") return { kind: "worker" };
  const colon = value.indexOf(":");
  const kind = TENANT_SCOPE_KINDS.find((k) => k === value.slice(0, colon));
  if (colon > 0 && kind) {
    const tenantId = value.slice(colon + 1);
    if (!TENANT_ID.test(tenantId)) {
      throw new ScopeError(
        `scope "${value.slice(0, 80)}" names a tenant id that is not 1-128 letters, digits, '_', '.', ':' or '-'`,
      );
    }
    return { kind, tenantId };
  }
  throw new ScopeError(`unknown scope "${value.slice(0, 80)}"; scopes are ${SCOPE_NAMES}`);
}

/** Scopes joined with `+`, e.g. `tenant:acme+revert:acme`. */
export function parseScopes(text: string): Scope[] {
  const parts = text.split("+").filter((p) => p.trim() !== "");
  if (parts.length === 0) throw new ScopeError(`no scope given; scopes are ${SCOPE_NAMES}`);
  return parts.map(parseScope);
}

export function formatScope(scope: Scope): string {
  return "tenantId" in scope ? `${scope.kind}:${scope.tenantId}` : scope.kind;
}

export function formatScopes(scopes: readonly Scope[]): string {
  return scopes.map(formatScope).join("+");
}

/** The scope that grants a capability for a tenant, to name in a refusal. */
export function scopeGranting(capability: Capability, tenantId: string): string {
  return `${capability === "steer" ? "tenant" : capability}:${tenantId}`;
}

export function isAdmin(principal: Principal): boolean {
  return principal.scopes.some((s) => s.kind === "admin");
}

/** The public RunService: an admin, or a caller holding any scope on at least one tenant. */
export function mayUseRunService(principal: Principal): boolean {
  return principal.scopes.some((s) => s.kind === "admin" || "tenantId" in s);
}

/** The internal WorkerService: workers (and admins). A tenant credential never reaches it. */
export function mayUseWorkerService(principal: Principal): boolean {
  return principal.scopes.some((s) => s.kind === "admin" || s.kind === "worker");
}

/** The tenants on which a caller has a capability; `undefined` means all of them (admin). */
export function tenantsWith(principal: Principal, capability: Capability): readonly string[] | undefined {
  if (isAdmin(principal)) return undefined;
  return [
    ...new Set(
      principal.scopes.flatMap((s) =>
        "tenantId" in s && GRANTS[s.kind].includes(capability) ? [s.tenantId] : [],
      ),
    ),
  ];
}

/** The tenants a caller may see; `undefined` means all of them (admin). Every tenant scope reads. */
export function visibleTenants(principal: Principal): readonly string[] | undefined {
  return tenantsWith(principal, "read");
}

export function mayOnTenant(principal: Principal, capability: Capability, tenantId: string): boolean {
  const tenants = tenantsWith(principal, capability);
  return tenants === undefined || tenants.includes(tenantId);
}

export function mayAccessTenant(principal: Principal, tenantId: string): boolean {
  return mayOnTenant(principal, "read", tenantId);
}
