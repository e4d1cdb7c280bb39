import {
  bearerToken,
  formatScopes,
  mayAccessTenant,
  mayUseRunService,
  mayUseWorkerService,
  type Principal,
  visibleTenants,
} from "@drover/auth";
import { type CallContext, Code, type Interceptor, RpcError, RunService, WorkerService } from "@drover/proto";
import type { Logger } from "@drover/telemetry";
import type { ApiKeyAuthenticator } from "./api-key-store.js";

/**
 * Who may call what, in one place. The interceptor authenticates every call of the services it
 * guards (the health service is registered without it and stays open) and decides per service;
 * handlers then ask the helpers below which tenants the caller may see. A call that reached a
 * handler without passing the interceptor has no caller and is refused: the default is closed.
 */

const callers = new WeakMap<CallContext, Principal>();

/** Which scopes may call each guarded service; a service not listed here is refused. */
const SERVICE_RULES: ReadonlyMap<string, (p: Principal) => boolean> = new Map([
  [RunService.typeName, mayUseRunService],
  [WorkerService.typeName, mayUseWorkerService],
]);

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
    if (!SERVICE_RULES.get(service)?.(principal)) {
      logger.warn(
        { method: call.method, key_id: principal.keyId, peer: call.peer },
        "credential used outside its scopes",
      );
      throw new RpcError(
        Code.PERMISSION_DENIED,
        `key "${principal.keyId}" (${formatScopes(principal.scopes)}) may not call ${service}`,
      );
    }
    callers.set(call, principal);
    return next();
  };
}

/** The authenticated caller of this call. */
export function callerOf(call: CallContext): Principal {
  const principal = callers.get(call);
  if (!principal) throw new RpcError(Code.UNAUTHENTICATED, "this call was not authenticated");
  return principal;
}

/** The tenants this caller may see; undefined means every tenant (an admin). */
export function callerTenants(call: CallContext): readonly string[] | undefined {
  return visibleTenants(callerOf(call));
}

/**
 * The run, if it exists and this caller may see it; otherwise NOT_FOUND, with the same words
 * whichever it was, so that another tenant's run ids cannot be probed.
 */
export function visibleRun<R extends { tenantId: string }>(
  call: CallContext,
  run: R | undefined,
  runId: string,
): R {
  if (!run || !mayAccessTenant(callerOf(call), run.tenantId)) {
    throw new RpcError(Code.NOT_FOUND, `run ${runId} does not exist`);
  }
  return run;
}

/** Reading about a tenant: another tenant's data is NOT_FOUND, as if there were none. */
export function requireVisibleTenant(call: CallContext, tenantId: string): void {
  if (!mayAccessTenant(callerOf(call), tenantId)) {
    throw new RpcError(Code.NOT_FOUND, `tenant "${tenantId}" has nothing this credential may see`);
  }
}

/** Acting for a tenant the caller names (StartRun): refused outright, nothing is revealed. */
export function requireActsFor(call: CallContext, tenantId: string): void {
  const principal = callerOf(call);
  if (!mayAccessTenant(principal, tenantId)) {
    throw new RpcError(
      Code.PERMISSION_DENIED,
      `key "${principal.keyId}" may not act for tenant "${tenantId}"`,
    );
  }
}

/** The caller's authorization, to pass on when a call is forwarded to another coordinator. */
export function forwardedCredentials(call: CallContext): Record<string, string> {
  const authorization = call.metadata.authorization;
  return authorization ? { authorization } : {};
}
