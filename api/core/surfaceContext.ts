import type { ServiceConfig } from "../config/serviceConfig.ts";
import type { Logger } from "../logger.ts";
import type { ServiceMetrics } from "../metrics/serviceMetrics.ts";
import type { Core } from "./createCore.ts";

/**
 * What a surface is built from: the use-cases, the settings, the logger and the metrics it
 * records into. No database: whatever a surface reads or writes, it asks `core` for (the
 * HTTP rate limiter gets its counts from the composition root, api/service.ts).
 */
export interface SurfaceContext {
  core: Core;
  config: ServiceConfig;
  logger: Logger;
  /** The service's metrics: the HTTP layer records into them, GET /metrics renders them. */
  metrics: ServiceMetrics;
}
