import { Code, RpcError } from "@drover/proto";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const TENANT = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

function invalid(message: string): RpcError {
  return new RpcError(Code.INVALID_ARGUMENT, message);
}

export function requireRunId(value: string): string {
  if (!value) throw invalid("run_id is required");
  if (!UUID.test(value)) throw invalid(`run_id must be a UUID, got "${value.slice(0, 64)}"`);
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
  if (value.length > max) throw invalid(`${field} is longer than ${max} characters`);
  return value;
}

export function optionalText(field: string, value: string, max: number): string {
  if (value.length > max) throw invalid(`${field} is longer than ${max} characters`);
  return value;
}

export { invalid };
