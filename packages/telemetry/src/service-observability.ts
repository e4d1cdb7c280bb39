import { initTelemetry, type TelemetryHandle } from "./init-telemetry.js";
import { type MetricsServer, serveMetrics } from "./metrics-server.js";

/** What every service process runs beside its work: traces (OTEL_* variables) and /metrics. */
export interface ServiceObservability {
  /** Added to the service's ready line, so parents (the demo, tests) learn where /metrics is. */
  readyFields: { metrics?: string };
  stop(): Promise<void>;
}

export async function startServiceObservability(
  serviceName: string,
  /** Where /metrics is served (DROVER_METRICS_HOST, DROVER_METRICS_PORT); a null port for none. */
  metrics: { host: string; port: number | null },
): Promise<ServiceObservability> {
  const telemetry: TelemetryHandle = initTelemetry({ serviceName });
  let metricsServer: MetricsServer | undefined;
  if (metrics.port !== null) {
    metricsServer = await serveMetrics({ host: metrics.host, port: metrics.port }).catch(async (err) => {
      await telemetry.shutdown();
      throw err;
    });
  }
  return {
    readyFields: metricsServer ? { metrics: metricsServer.url } : {},
    async stop() {
      await metricsServer?.close();
      await telemetry.shutdown();
    },
  };
}
