import {
  bearerToken,
  type Capability,
  formatScopes,
  mayOnTenant,
  mayUseRunService,
  mayUseWorkerService,
  type Principal,
  scopeGranting,
  tenantsWith,
} from "@drover/auth";
import { type CallContext, Code, type Interceptor, RpcError, RunService, WorkerService } from "@drover/proto";
import type { Logger } from "@drover/telemetry";
import type { ApiKeyAuthenticator } from "./api-key-store.js";

/**
 * Who may call what, in one place. The interceptor authenticates every call of the services it
 * guards (the health service is registered without it and stays open) and checks the method against
 * METHOD_RULES; handlers then ask the helpers below whether the caller has that same capability on
 * the tenant the call touches. A call that reached a handler without passing the interceptor has no
 * caller and is refused: the default is closed.
 */

/** What each method needs: a capability on the tenant it touches (RunService), or the worker role. */
type Requirement = Capability | "worker";

/**
 * Every RunService method, by the capability it needs on the run's (or named) tenant. Typed by the
 * service's own method list, so a new RPC does not compile until it is placed here. Reading is
 * everything that changes nothing (VerifyRun is not: it spends the source's budget); reverting
 * deletes what a run imported, so no tenant key may do it without `revert:<tenant>`.
 */
const RUN_SERVICE_RULES: Readonly<Record<keyof typeof RunService.method, Capability>> = {
  getRun: "read",
  listRuns: "read",
  watchRun: "read",
  listNotes: "read",
  explainRecord: "read",
  getThroughput: "read",
  listAuditEvents: "read",
  startRun: "steer",
  stopRun: "steer",
  resumeRun: "steer",
  retryRun: "steer",
  completeRun: "steer",
  verifyRun: "steer",
  revertRun: "revert",
  // The ledger goes after the grace: as destructive as a revert of what explain and revert need.
  closeMigration: "revert",
};

/** `drover.v1.RunService/StartRun` (as CallContext.method spells it) → what it needs. */
const METHOD_RULES: ReadonlyMap<string, Requirement> = new Map<string, Requirement>([
  ...Object.entries(RUN_SERVICE_RULES).map(
    ([local, capability]) =>
      [
        `${RunService.typeName}/${RunService.method[local as keyof typeof RunService.method].name}`,
        capability,
      ] as const,
  ),
  ...WorkerService.methods.map((m) => [`${WorkerService.typeName}/${m.name}`, "worker"] as const),
]);

/** What a method needs; undefined for a method no rule names (refused). */
function requirementOf(method: string): Requirement | undefined {
  return METHOD_RULES.get(method);
}

interface Caller {
  principal: Principal;
  capability: Capability;
}

/** Callers past authentication, whatever was decided next (the audit trail records refusals too). */
const authenticated = new WeakMap<CallContext, Principal>();
/** Callers past authentication and METHOD_RULES, with the capability their method needs. */
const callers = new WeakMap<CallContext, Caller>();

export function authInterceptor(authenticator: ApiKeyAuthenticator, logger: Logger): Interceptor {
  return async (call, next) => {
    const service = call.method.slice(0, call.method.lastIndexOf("/"));
    const token = bearerToken(call.metadata.authorization);
    if (!token) {
      throw new RpcError(
        Code.UNAUTHENTICATED,
        "this call needs a credential: send the metadata `authorization: Bearer <token>`",
      );
    }
    let principal: Principal | undefined;
    try {
      principal = await authenticator.authenticate(token);
    } catch (err) {
      logger.error({ err, method: call.method }, "cannot read the API keys");
      throw new RpcError(Code.UNAVAILABLE, "credentials cannot be checked right now; retry shortly");
    }
    if (!principal) {
      logger.debug({ method: call.method, peer: call.peer }, "unknown or revoked credential");
      throw new RpcError(Code.UNAUTHENTICATED, "the credential is unknown or revoked");
    }
    authenticated.set(call, principal);
    const refuse = (why: string) => {
      logger.warn(
        { method: call.method, key_id: principal.keyId, peer: call.peer },
        "credential used outside its scopes",
      );
      return new RpcError(
        Code.PERMISSION_DENIED,
        `key "${principal.keyId}" (${formatScopes(principal.scopes)}) may not call ${why}`,
      );
    };
    const requirement = requirementOf(call.method);
    if (requirement === undefined) throw refuse(service);
    if (requirement === "worker") {
      if (!mayUseWorkerService(principal)) throw refuse(service);
      return next();
    }
    // The caller must have the capability somewhere; which tenant the call touches is known only
    // to the handler, which checks it with the helpers below.
    if (!mayUseRunService(principal)) throw refuse(service);
    if (tenantsWith(principal, requirement)?.length === 0)
      throw refuse(`${call.method.slice(service.length + 1)}: it needs ${needs(requirement)}`);
    callers.set(call, { principal, capability: requirement });
    return next();
  };
}

/** The scope that grants a capability, as a refusal names it. */
function needs(capability: Capability, tenantId = "<tenant>"): string {
  return `the scope ${scopeGranting(capability, tenantId)} (or admin)`;
}

/** The key that authenticated this call, even when the call was then refused; undefined before that. */
export function authenticatedCaller(call: CallContext): Principal | undefined {
  return authenticated.get(call);
}

/** The authenticated caller of this call. */
export function callerOf(call: CallContext): Principal {
  return checkedCaller(call).principal;
}

function checkedCaller(call: CallContext): Caller {
  const caller = callers.get(call);
  if (!caller) throw new RpcError(Code.UNAUTHENTICATED, "this call was not authenticated");
  return caller;
}

/** The tenants this caller may see; undefined means every tenant (an admin). */
export function callerTenants(call: CallContext): readonly string[] | undefined {
  return tenantsWith(callerOf(call), "read");
}

/**
 * The run, if it exists and this caller may see it; otherwise NOT_FOUND, with the same words
 * whichever it was, so that another tenant's run ids cannot be probed. A run the caller may see but
 * not act on as the method asks (a read-only key stopping it, a tenant key reverting it) is
 * PERMISSION_DENIED, naming the scope it would take.
 */
export function visibleRun<R extends { tenantId: string }>(
  call: CallContext,
  run: R | undefined,
  runId: string,
): R {
  const { principal } = checkedCaller(call);
  if (!run || !mayOnTenant(principal, "read", run.tenantId)) {
    throw new RpcError(Code.NOT_FOUND, `run ${runId} does not exist`);
  }
  requireCapability(call, run.tenantId);
  return run;
}

/** Reading about a tenant: another tenant's data is NOT_FOUND, as if there were none. */
export function requireVisibleTenant(call: CallContext, tenantId: string): void {
  if (!mayOnTenant(callerOf(call), "read", tenantId)) {
    throw new RpcError(Code.NOT_FOUND, `tenant "${tenantId}" has nothing this credential may see`);
  }
  requireCapability(call, tenantId);
}

/** Acting for a tenant the caller names (StartRun): refused outright, nothing is revealed. */
export function requireActsFor(call: CallContext, tenantId: string): void {
  requireCapability(call, tenantId);
}

/** The capability the call's method needs (METHOD_RULES), on this tenant. */
function requireCapability(call: CallContext, tenantId: string): void {
  const { principal, capability } = checkedCaller(call);
  if (!mayOnTenant(principal, capability, tenantId)) {
    throw new RpcError(
      Code.PERMISSION_DENIED,
      `key "${principal.keyId}" may not ${VERBS[capability]} for tenant "${tenantId}": that needs ${needs(capability, tenantId)}`,
    );
  }
}

const VERBS: Readonly<Record<Capability, string>> = {
  read: "read",
  steer: "act",
  revert: "revert runs",
};

/** The caller's authorization, to pass on when a call is forwarded to another coordinator. */
export function forwardedCredentials(call: CallContext): Record<string, string> {
  const authorization = call.metadata.authorization;
  return authorization ? { authorization } : {};
}
