/**
 * What a credential may do. Three scopes:
 * - `admin`: everything, for every tenant;
 * - `tenant:<id>`: the public RunService, for that one tenant's runs only;
 * - `worker`: the internal WorkerService only.
 */
export type Scope = { kind: "admin" } | { kind: "worker" } | { kind: "tenant"; tenantId: string };

/** Who is calling: the key that authenticated the call, never the token itself. */
export interface Principal {
  keyId: string;
  scopes: readonly Scope[];
}

/** The same rule as tenant ids at the API's edge. */
const TENANT_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

export class ScopeError extends Error {
  override readonly name = "ScopeError";
}

/** `admin`, `worker` or `tenant:<id>`. */
export function parseScope(text: string): Scope {
  const value = text.trim();
  if (value === "admin") return { kind: "admin" };
  if (value === "worker") return { kind: "worker" };
  if (value.startsWith("tenant:")) {
    const tenantId = value.slice("tenant:".length);
    if (!TENANT_ID.test(tenantId)) {
      throw new ScopeError(
        `scope "${value.slice(0, 80)}" names a tenant id that is not 1-128 letters, digits, '_', '.', ':' or '-'`,
      );
    }
    return { kind: "tenant", tenantId };
  }
  throw new ScopeError(`unknown scope "${value.slice(0, 80)}"; scopes are admin, worker and tenant:<id>`);
}

/** Scopes joined with `+`, e.g. `tenant:acme+tenant:globex`. */
export function parseScopes(text: string): Scope[] {
  const parts = text.split("+").filter((p) => p.trim() !== "");
  if (parts.length === 0) throw new ScopeError("no scope given; scopes are admin, worker and tenant:<id>");
  return parts.map(parseScope);
}

export function formatScope(scope: Scope): string {
  return scope.kind === "tenant" ? `tenant:${scope.tenantId}` : scope.kind;
}

export function formatScopes(scopes: readonly Scope[]): string {
  return scopes.map(formatScope).join("+");
}

export function isAdmin(principal: Principal): boolean {
  return principal.scopes.some((s) => s.kind === "admin");
}

/** The public RunService: an admin, or a caller acting for at least one tenant. */
export function mayUseRunService(principal: Principal): boolean {
  return principal.scopes.some((s) => s.kind === "admin" || s.kind === "tenant");
}

/** The internal WorkerService: workers (and admins). A tenant credential never reaches it. */
export function mayUseWorkerService(principal: Principal): boolean {
  return principal.scopes.some((s) => s.kind === "admin" || s.kind === "worker");
}

/** The tenants a caller may see and steer; `undefined` means all of them (admin). */
export function visibleTenants(principal: Principal): readonly string[] | undefined {
  if (isAdmin(principal)) return undefined;
  return [...new Set(principal.scopes.flatMap((s) => (s.kind === "tenant" ? [s.tenantId] : [])))];
}

export function mayAccessTenant(principal: Principal, tenantId: string): boolean {
  const tenants = visibleTenants(principal);
  return tenants === undefined || tenants.includes(tenantId);
}
