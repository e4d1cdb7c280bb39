import { defaultResource, type Resource, resourceFromAttributes } from "@opentelemetry/resources";
import { ATTR_SERVICE_NAME } from "@opentelemetry/semantic-conventions";

/**
 * Precedence follows the OTel SDK spec: OTEL_SERVICE_NAME beats the name the code asks for, which beats
 * a `service.name` smuggled in through OTEL_RESOURCE_ATTRIBUTES.
 */
export function buildResource(serviceName: string, env: NodeJS.ProcessEnv): Resource {
  const fromEnv = parseResourceAttributes(env.OTEL_RESOURCE_ATTRIBUTES);
  const name = env.OTEL_SERVICE_NAME?.trim() || serviceName;
  return defaultResource()
    .merge(resourceFromAttributes(fromEnv))
    .merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: name }));
}

/** `k1=v1,k2=v2` with percent-encoded values; malformed pairs are skipped rather than failing boot. */
export function parseResourceAttributes(raw: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of (raw ?? "").split(",")) {
    const eq = pair.indexOf("=");
    if (eq <= 0) continue;
    const key = pair.slice(0, eq).trim();
    try {
      out[key] = decodeURIComponent(pair.slice(eq + 1).trim());
    } catch {
      // A bad escape in one attribute should not cost the service its telemetry.
    }
  }
  return out;
}
