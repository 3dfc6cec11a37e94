import type { PublicClient } from "viem";
import type { ServiceConfig } from "./config/serviceConfig.ts";
import type { Database } from "./db/connect.ts";
import type { Logger } from "./logger.ts";

/** What every worker and domain operation of the service is built from. */
export interface ServiceDeps {
  sql: Database;
  chain: PublicClient;
  config: ServiceConfig;
  logger: Logger;
}
