import { describe, expect, it } from "vitest";
import {
  formatScopes,
  mayAccessTenant,
  mayOnTenant,
  mayUseRunService,
  mayUseWorkerService,
  type Principal,
  parseScopes,
  tenantsWith,
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

  it("a tenant scope reads and steers but does not revert; revert needs revert:<id>", () => {
    const tenant = who("tenant:acme");
    expect(mayOnTenant(tenant, "read", "acme")).toBe(true);
    expect(mayOnTenant(tenant, "steer", "acme")).toBe(true);
    expect(mayOnTenant(tenant, "revert", "acme")).toBe(false);
    const reverter = who("tenant:acme+revert:acme");
    expect(mayOnTenant(reverter, "revert", "acme")).toBe(true);
    expect(mayOnTenant(reverter, "revert", "globex")).toBe(false);
    expect(mayOnTenant(who("admin"), "revert", "anyone")).toBe(true);
  });

  it("a read scope sees its tenant and may change nothing", () => {
    const reader = who("read:acme+read:eu:globex");
    expect(mayUseRunService(reader)).toBe(true);
    expect(mayUseWorkerService(reader)).toBe(false);
    expect(visibleTenants(reader)).toEqual(["acme", "eu:globex"]);
    expect(tenantsWith(reader, "steer")).toEqual([]);
    expect(tenantsWith(reader, "revert")).toEqual([]);
  });

  it("a revert scope reads and reverts its tenant but does not steer it", () => {
    const reverter = who("revert:acme");
    expect(visibleTenants(reverter)).toEqual(["acme"]);
    expect(tenantsWith(reverter, "revert")).toEqual(["acme"]);
    expect(tenantsWith(reverter, "steer")).toEqual([]);
  });

  it("formats what it parses", () => {
    expect(formatScopes(parseScopes("worker+tenant:a:b"))).toBe("worker+tenant:a:b");
    expect(formatScopes(parseScopes("read:a+revert:a:b"))).toBe("read:a+revert:a:b");
    expect(() => parseScopes("revert:")).toThrow(/tenant id/);
    expect(() => parseScopes("reader:acme")).toThrow(/unknown scope "reader:acme"/);
    expect(() => parseScopes("tenant:-x")).toThrow(/tenant id/);
    expect(() => parseScopes("superuser")).toThrow(/unknown scope "superuser"/);
  });
});
