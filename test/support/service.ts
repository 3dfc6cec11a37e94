import { parseServiceConfig, type ServiceConfig } from "../../api/config/serviceConfig.ts";
import { createLogger } from "../../api/logger.ts";
import { startService } from "../../api/service.ts";
import { devnetServiceEnv } from "../../scripts/devnet/devnetServiceEnv.ts";
import type { TestChain } from "./chain.ts";

/** The environment `npm start` would give the service on this test chain and database. */
export function testServiceEnv(
  chain: Pick<TestChain, "rpcUrl" | "accounts">,
  databaseUrl: string,
  overrides: Record<string, string> = {},
): Record<string, string> {
  return {
    ...devnetServiceEnv(chain.accounts, { rpcUrl: chain.rpcUrl, databaseUrl }),
    HOST: "127.0.0.1",
    PORT: "0",
    LOG_LEVEL: process.env.SERVICE_TEST_LOGS ? "debug" : "silent",
    // Tests poll; the rate-limit tests turn limits on with their own numbers.
    RATE_LIMIT_ENABLED: "false",
    // A busy test machine's database can take longer than the default 500 ms to count: a test
    // that enables limits then saw writes refused as uncountable. Tests about a slow counter
    // set their own.
    RATE_LIMIT_COUNT_TIMEOUT_MS: "10000",
    // Tests create many claims from 127.0.0.1; the claim-abuse tests set their own cap.
    OPEN_CLAIMS_PER_CLIENT: "0",
    ...overrides,
  };
}

export function testServiceConfig(...args: Parameters<typeof testServiceEnv>): ServiceConfig {
  return parseServiceConfig(testServiceEnv(...args));
}

/** The service in this process, on a free port. */
export async function startTestService(...args: Parameters<typeof testServiceEnv>) {
  const config = testServiceConfig(...args);
  return startService(config, createLogger(config.logLevel));
}
