import { describe, expect, it } from "vitest";
import {
  formatScopes,
  mayAccessTenant,
  mayUseRunService,
  mayUseWorkerService,
  type Principal,
  parseScopes,
  visibleTenants,
} from "../src/index.js";

const who = (scopes: string): Principal => ({ keyId: "k", scopes: parseScopes(scopes) });

describe("scopes", () => {
  it("admin may do everything, for every tenant", () => {
    const admin = who("admin");
    expect(mayUseRunService(admin)).toBe(true);
    expect(mayUseWorkerService(admin)).toBe(true);
    expect(visibleTenants(admin)).toBeUndefined();
    expect(mayAccessTenant(admin, "anyone")).toBe(true);
  });

  it("a worker credential reaches WorkerService only, and no tenant", () => {
    const worker = who("worker");
    expect(mayUseWorkerService(worker)).toBe(true);
    expect(mayUseRunService(worker)).toBe(false);
    expect(visibleTenants(worker)).toEqual([]);
    expect(mayAccessTenant(worker, "acme")).toBe(false);
  });

  it("a tenant credential reaches RunService for its own tenants only, and never WorkerService", () => {
    const tenant = who("tenant:acme+tenant:globex+tenant:acme");
    expect(mayUseRunService(tenant)).toBe(true);
    expect(mayUseWorkerService(tenant)).toBe(false);
    expect(visibleTenants(tenant)).toEqual(["acme", "globex"]);
    expect(mayAccessTenant(tenant, "acme")).toBe(true);
    expect(mayAccessTenant(tenant, "initech")).toBe(false);
    expect(mayAccessTenant(tenant, "acme ")).toBe(false);
  });

  it("formats what it parses", () => {
    expect(formatScopes(parseScopes("worker+tenant:a:b"))).toBe("worker+tenant:a:b");
    expect(() => parseScopes("tenant:-x")).toThrow(/tenant id/);
    expect(() => parseScopes("superuser")).toThrow(/unknown scope "superuser"/);
  });
});
