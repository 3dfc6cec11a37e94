import { existsSync, readFileSync } from "node:fs";
import { parseEnv } from "node:util";
import { createPublicClient, http, type PublicClient } from "viem";
import { parseServiceConfig, type ServiceConfig } from "../../api/config/serviceConfig.ts";
import { ConfigError } from "../../api/config/settings.ts";
import { connectDatabase, type Database } from "../../api/db/connect.ts";
import { CliError } from "../errors.ts";

/**
 * The operator commands read the configuration the service reads: the environment, and `.env`
 * in the working directory for what the environment does not set (as `npm start` does).
 */
export function operatorEnvironment(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  if (existsSync(".env")) {
    for (const [name, value] of Object.entries(parseEnv(readFileSync(".env", "utf8")))) {
      if (env[name] === undefined && value !== undefined) env[name] = value;
    }
  }
  return env;
}

export type ConfigReading = { ok: true; config: ServiceConfig } | { ok: false; problems: string[] };

export function readServiceConfig(env = operatorEnvironment()): ConfigReading {
  try {
    return { ok: true, config: parseServiceConfig(env) };
  } catch (error) {
    if (error instanceof ConfigError) return { ok: false, problems: error.problems };
    throw error;
  }
}

/** The service's configuration, or one line naming what is broken. */
export function requireServiceConfig(): ServiceConfig {
  const reading = readServiceConfig();
  if (reading.ok) return reading.config;
  throw new CliError(
    "invalid_configuration",
    `invalid_configuration: ${reading.problems.join("; ")} (the service's settings, from the environment and .env)`,
    2,
  );
}

export interface OperatorConnections {
  sql: Database;
  chain: PublicClient;
  close(): Promise<void>;
}

export function connect(config: ServiceConfig): OperatorConnections {
  const sql = connectDatabase(config.databaseUrl, {
    max: 2,
    name: "pay-and-earn-cli",
    statementTimeoutMs: 15_000,
  });
  const chain = createPublicClient({
    transport: http(config.chain.rpcUrl, { retryCount: 0, timeout: 5_000 }),
  }) as PublicClient;
  return { sql, chain, close: () => sql.end({ timeout: 5 }) };
}
