import { parseServiceConfig, type ServiceConfig } from "../../api/config.ts";
import { createLogger } from "../../api/logger.ts";
import { startService } from "../../api/service.ts";
import type { TestChain } from "./chain.ts";

/** The environment `npm start` would give the service on this test chain and database. */
export function testServiceEnv(
  chain: Pick<TestChain, "rpcUrl" | "payTo" | "payout" | "receiptSigner" | "facilitator">,
  databaseUrl: string,
  overrides: Record<string, string> = {},
): Record<string, string> {
  return {
    RPC_URL: chain.rpcUrl,
    CHAIN_ID: "8453",
    DATABASE_URL: databaseUrl,
    PAY_TO: chain.payTo.address,
    PAYOUT_PRIVATE_KEY: chain.payout.privateKey,
    RECEIPT_SIGNER_PRIVATE_KEY: chain.receiptSigner.privateKey,
    FACILITATOR_PRIVATE_KEY: chain.facilitator.privateKey,
    HOST: "127.0.0.1",
    PORT: "0",
    LOG_LEVEL: process.env.SERVICE_TEST_LOGS ? "debug" : "silent",
    // Tests poll; the rate-limit tests turn limits on with their own numbers.
    RATE_LIMIT_ENABLED: "false",
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
