import { getAddress, type Hex, isAddress } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { z } from "zod";
import { BASE_USDC_ADDRESS } from "../contracts-abi/usdc.ts";

/**
 * Every setting of the service and the indexer, read from the environment once at start.
 * `.env.example` documents each one; a broken setting stops start-up with one line per problem.
 */

const address = z
  .string()
  .refine((value) => isAddress(value, { strict: true }), "is not an address")
  .transform((value) => getAddress(value));

const privateKey = z
  .string()
  .regex(/^0x[0-9a-fA-F]{64}$/, "is not a private key (0x and 64 hex digits)")
  .transform((value) => value as Hex);

const httpUrl = z
  .string()
  .refine((value) => URL.canParse(value) && /^https?:$/.test(new URL(value).protocol), {
    message: "is not an http(s) URL",
  });

const postgresUrl = z
  .string()
  .refine((value) => URL.canParse(value) && /^postgres(ql)?:$/.test(new URL(value).protocol), {
    message: "is not a postgres:// URL",
  });

const wholeNumber = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z.coerce
    .number({ message: "is not a number" })
    .int({ message: "is not a whole number" })
    .min(min, { message: `must be at least ${min}` })
    .max(max, { message: `must be at most ${max}` });

/** Where a crash test may make the process SIGKILL itself (api/crashHook.ts). */
export const CRASH_POINTS = [
  "after_payouts_signed",
  "after_payouts_broadcast",
  "after_x402_recorded",
  "after_x402_settled",
] as const;

const chainSettings = {
  RPC_URL: httpUrl,
  CHAIN_ID: wholeNumber(1).default(8453),
  USDC_ADDRESS: address.default(BASE_USDC_ADDRESS),
  PAY_TO: address,
  DATABASE_URL: postgresUrl,
};

const serviceSchema = z
  .object({
    ...chainSettings,
    PAYOUT_PRIVATE_KEY: privateKey,
    RECEIPT_SIGNER_PRIVATE_KEY: privateKey,
    ROLE: z
      .enum(["all", "api", "worker"], { message: "must be all, api or worker" })
      .default("all"),
    HOST: z.string().min(1).default("127.0.0.1"),
    PORT: wholeNumber(0, 65535).default(3000),
    PUBLIC_URL: httpUrl.optional(),
    EXPLORER_URL: httpUrl.default("https://basescan.org"),
    CONFIRMATIONS: wholeNumber(0, 1000).default(3),
    INDEXER_MAX_LAG_BLOCKS: wholeNumber(1).default(15),
    MATCHING_VARIANT: z.enum(["A", "B"], { message: "must be A or B" }).default("A"),
    CLAIM_LIFETIME_SECONDS: wholeNumber(1).default(7 * 24 * 3600),
    EXPIRY_GRACE_SECONDS: wholeNumber(0).default(15 * 60),
    AMOUNT_HOLD_SECONDS: wholeNumber(0).default(30 * 24 * 3600),
    MATCHER_INTERVAL_MS: wholeNumber(10, 60_000).default(500),
    EXPIRY_INTERVAL_MS: wholeNumber(10, 3_600_000).default(5_000),
    PAYOUT_INTERVAL_MS: wholeNumber(10, 60_000).default(250),
    PAYOUT_CONFIRM_POLL_MS: wholeNumber(10, 60_000).default(50),
    PAYOUT_BATCH_SIZE: wholeNumber(1, 2_000).default(500),
    PAYOUT_GAS_LIMIT: wholeNumber(21_000, 1_000_000).default(100_000),
    PAYOUT_MAX_FEE_GWEI: z.coerce
      .number({ message: "is not a number" })
      .positive({ message: "must be more than 0" })
      .default(10),
    PAYOUT_MIN_ETH: z.coerce
      .number({ message: "is not a number" })
      .nonnegative({ message: "must be 0 or more" })
      .default(0.0005),
    PAYOUT_REBROADCAST_SECONDS: wholeNumber(1).default(12),
    PAYOUT_REPLACE_SECONDS: wholeNumber(1).default(30),
    X402_FACILITATOR: z
      .enum(["local", "remote", "off"], { message: "must be local, remote or off" })
      .default("local"),
    FACILITATOR_PRIVATE_KEY: privateKey.optional(),
    X402_FACILITATOR_URL: httpUrl.optional(),
    CDP_API_KEY_ID: z.string().min(1).optional(),
    CDP_API_KEY_SECRET: z.string().min(1).optional(),
    X402_MAX_TIMEOUT_SECONDS: wholeNumber(30, 3600).default(300),
    X402_SETTLE_TIMEOUT_MS: wholeNumber(1_000, 600_000).default(30_000),
    X402_PAYOUT_WAIT_MS: wholeNumber(0, 600_000).default(15_000),
    /** Test hook: the process SIGKILLs itself at this point of the payout path. */
    CRASH_AT: z
      .enum(CRASH_POINTS, { message: `must be one of ${CRASH_POINTS.join(", ")}` })
      .optional(),
    LOG_LEVEL: z
      .enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"], {
        message: "must be one of fatal, error, warn, info, debug, trace, silent",
      })
      .default("info"),
    // ── HTTP hardening, health thresholds, metrics (api/http/middleware, api/metrics) ──
    /** false, a number of proxies in front, or their addresses (Express's `trust proxy`). */
    TRUST_PROXY: z
      .string()
      .refine(
        (value) =>
          /^(false|\d{1,2})$/.test(value) ||
          value
            .split(",")
            .every((entry) =>
              /^(loopback|linklocal|uniquelocal|[\d.]+(\/\d{1,2})?|[\da-fA-F:.]*:[\da-fA-F:.]*(\/\d{1,3})?)$/.test(
                entry.trim(),
              ),
            ),
        "must be false, the number of proxies in front (1, 2 …) or their addresses (10.0.0.0/8, loopback …)",
      )
      .default("false"),
    RATE_LIMIT_ENABLED: z
      .enum(["true", "false"], { message: "must be true or false" })
      .default("true"),
    RATE_LIMIT_WINDOW_SECONDS: wholeNumber(1, 86_400).default(60),
    RATE_LIMIT_READS: wholeNumber(1).default(600),
    RATE_LIMIT_WRITES: wholeNumber(1).default(60),
    METRICS_TOKEN: z.string().min(16, { message: "must be at least 16 characters" }).optional(),
    HEALTH_MATCHER_BACKLOG_SECONDS: wholeNumber(1).default(60),
    HEALTH_PAYOUT_BACKLOG_SECONDS: wholeNumber(1).default(120),
    // ── end of HTTP hardening, health thresholds, metrics ──
  })
  .superRefine((settings, context) => {
    if (settings.X402_FACILITATOR === "local") {
      if (!settings.FACILITATOR_PRIVATE_KEY) {
        context.addIssue({
          code: "custom",
          path: ["FACILITATOR_PRIVATE_KEY"],
          message: "is required with X402_FACILITATOR=local (it pays the gas of settlements)",
        });
      } else if (
        settings.FACILITATOR_PRIVATE_KEY.toLowerCase() === settings.PAYOUT_PRIVATE_KEY.toLowerCase()
      ) {
        context.addIssue({
          code: "custom",
          path: ["FACILITATOR_PRIVATE_KEY"],
          message:
            "must differ from PAYOUT_PRIVATE_KEY (payout nonces are managed in the database)",
        });
      }
    }
    if (
      settings.X402_FACILITATOR === "remote" &&
      !settings.X402_FACILITATOR_URL &&
      !(settings.CDP_API_KEY_ID && settings.CDP_API_KEY_SECRET)
    ) {
      context.addIssue({
        code: "custom",
        path: ["X402_FACILITATOR_URL"],
        message:
          "is required with X402_FACILITATOR=remote (or CDP_API_KEY_ID and CDP_API_KEY_SECRET)",
      });
    }
    if (
      settings.PAYOUT_PRIVATE_KEY.toLowerCase() ===
      settings.RECEIPT_SIGNER_PRIVATE_KEY.toLowerCase()
    ) {
      context.addIssue({
        code: "custom",
        path: ["RECEIPT_SIGNER_PRIVATE_KEY"],
        message: "must differ from PAYOUT_PRIVATE_KEY (receipts are signed by their own key)",
      });
    }
  })
  .transform((settings) => {
    const payoutAccount = privateKeyToAccount(settings.PAYOUT_PRIVATE_KEY);
    const receiptSigner = privateKeyToAccount(settings.RECEIPT_SIGNER_PRIVATE_KEY);
    return {
      serviceName: "pay-and-earn",
      /** Test hook (api/crashHook.ts); never set in production. */
      crashAt: settings.CRASH_AT,
      role: settings.ROLE,
      http: {
        host: settings.HOST,
        port: settings.PORT,
        publicUrl: (settings.PUBLIC_URL ?? `http://localhost:${settings.PORT}`).replace(/\/+$/, ""),
        /** False when PUBLIC_URL is unset: the service then names itself by its bound port. */
        publicUrlConfigured: settings.PUBLIC_URL !== undefined,
      },
      chain: {
        rpcUrl: settings.RPC_URL,
        chainId: settings.CHAIN_ID,
        usdcAddress: settings.USDC_ADDRESS,
        payTo: settings.PAY_TO,
        explorerUrl: settings.EXPLORER_URL.replace(/\/+$/, ""),
        confirmations: settings.CONFIRMATIONS,
      },
      indexer: { maxLagBlocks: settings.INDEXER_MAX_LAG_BLOCKS },
      claims: {
        variant: settings.MATCHING_VARIANT,
        lifetimeSeconds: settings.CLAIM_LIFETIME_SECONDS,
        expiryGraceSeconds: settings.EXPIRY_GRACE_SECONDS,
        amountHoldSeconds: settings.AMOUNT_HOLD_SECONDS,
        expiryIntervalMs: settings.EXPIRY_INTERVAL_MS,
      },
      matcher: { intervalMs: settings.MATCHER_INTERVAL_MS },
      x402: {
        facilitator: settings.X402_FACILITATOR,
        facilitatorPrivateKey: settings.FACILITATOR_PRIVATE_KEY,
        facilitatorUrl: settings.X402_FACILITATOR_URL,
        cdp:
          settings.CDP_API_KEY_ID && settings.CDP_API_KEY_SECRET
            ? { keyId: settings.CDP_API_KEY_ID, keySecret: settings.CDP_API_KEY_SECRET }
            : undefined,
        maxTimeoutSeconds: settings.X402_MAX_TIMEOUT_SECONDS,
        settleTimeoutMs: settings.X402_SETTLE_TIMEOUT_MS,
        payoutWaitMs: settings.X402_PAYOUT_WAIT_MS,
      },
      payouts: {
        intervalMs: settings.PAYOUT_INTERVAL_MS,
        confirmPollMs: settings.PAYOUT_CONFIRM_POLL_MS,
        batchSize: settings.PAYOUT_BATCH_SIZE,
        gasLimit: BigInt(settings.PAYOUT_GAS_LIMIT),
        maxFeePerGas: BigInt(Math.round(settings.PAYOUT_MAX_FEE_GWEI * 1e9)),
        minEthBalance: BigInt(Math.round(settings.PAYOUT_MIN_ETH * 1e18)),
        rebroadcastAfterMs: settings.PAYOUT_REBROADCAST_SECONDS * 1000,
        replaceAfterMs: settings.PAYOUT_REPLACE_SECONDS * 1000,
      },
      databaseUrl: settings.DATABASE_URL,
      payout: { privateKey: settings.PAYOUT_PRIVATE_KEY, address: payoutAccount.address },
      receipts: { privateKey: settings.RECEIPT_SIGNER_PRIVATE_KEY, signer: receiptSigner.address },
      logLevel: settings.LOG_LEVEL,
      // ── HTTP hardening, health thresholds, metrics ──
      trustProxy:
        settings.TRUST_PROXY === "false"
          ? (false as const)
          : /^\d+$/.test(settings.TRUST_PROXY)
            ? Number(settings.TRUST_PROXY)
            : settings.TRUST_PROXY.split(",").map((entry) => entry.trim()),
      rateLimits: {
        enabled: settings.RATE_LIMIT_ENABLED === "true",
        windowSeconds: settings.RATE_LIMIT_WINDOW_SECONDS,
        reads: settings.RATE_LIMIT_READS,
        writes: settings.RATE_LIMIT_WRITES,
      },
      metrics: { token: settings.METRICS_TOKEN },
      health: {
        matcherBacklogSeconds: settings.HEALTH_MATCHER_BACKLOG_SECONDS,
        payoutBacklogSeconds: settings.HEALTH_PAYOUT_BACKLOG_SECONDS,
      },
      // ── end of HTTP hardening, health thresholds, metrics ──
    };
  });

const indexerSchema = z
  .object({
    ...chainSettings,
    PAYOUT_ADDRESS: address.optional(),
    PAYOUT_PRIVATE_KEY: privateKey.optional(),
    START_BLOCK: wholeNumber(0).default(0),
    INDEXER_POLLING_INTERVAL_MS: wholeNumber(50, 60_000).default(1_000),
  })
  .superRefine((settings, context) => {
    if (!settings.PAYOUT_ADDRESS && !settings.PAYOUT_PRIVATE_KEY) {
      context.addIssue({
        code: "custom",
        path: ["PAYOUT_ADDRESS"],
        message: "is required (or PAYOUT_PRIVATE_KEY, from which it is derived)",
      });
    }
  })
  .transform((settings) => ({
    rpcUrl: settings.RPC_URL,
    chainId: settings.CHAIN_ID,
    usdcAddress: settings.USDC_ADDRESS,
    payTo: settings.PAY_TO,
    payoutAddress:
      settings.PAYOUT_ADDRESS ?? privateKeyToAccount(settings.PAYOUT_PRIVATE_KEY as Hex).address,
    startBlock: settings.START_BLOCK,
    pollingIntervalMs: settings.INDEXER_POLLING_INTERVAL_MS,
    databaseUrl: settings.DATABASE_URL,
  }));

/** `npm start`'s own settings: which local pieces to run and on which ports. */
const launcherSchema = z
  .object({
    RPC_URL: httpUrl.optional(),
    DATABASE_URL: postgresUrl.optional(),
    FORK_URL: httpUrl.optional(),
    DEVNET_DIR: z.string().min(1).default(".devnet"),
    ANVIL_PORT: wholeNumber(1, 65535).default(8545),
    BLOCK_TIME: z.coerce
      .number({ message: "is not a number" })
      .positive({ message: "must be more than 0 seconds" })
      .default(2),
    EMBEDDED_POSTGRES_PORT: wholeNumber(1, 65535).default(5433),
    PONDER_PORT: wholeNumber(1, 65535).default(42069),
    PORT: wholeNumber(1, 65535).default(3000),
    START_BLOCK: wholeNumber(0).optional(),
  })
  .superRefine((settings, context) => {
    if (settings.RPC_URL && settings.FORK_URL) {
      context.addIssue({
        code: "custom",
        path: ["FORK_URL"],
        message: "only applies to the devnet; unset RPC_URL to fork with Anvil",
      });
    }
    if (settings.RPC_URL && settings.START_BLOCK === undefined) {
      context.addIssue({
        code: "custom",
        path: ["START_BLOCK"],
        message:
          "is required with RPC_URL (the block pay_to was first used; indexing from 0 takes hours)",
      });
    }
  })
  .transform((settings) => ({
    mode: settings.RPC_URL ? ("configured" as const) : ("devnet" as const),
    databaseUrl: settings.DATABASE_URL,
    forkUrl: settings.FORK_URL,
    devnetDirectory: settings.DEVNET_DIR,
    anvilPort: settings.ANVIL_PORT,
    blockTimeSeconds: settings.BLOCK_TIME,
    embeddedPostgresPort: settings.EMBEDDED_POSTGRES_PORT,
    ponderPort: settings.PONDER_PORT,
    servicePort: settings.PORT,
  }));

export type ServiceConfig = z.output<typeof serviceSchema>;
export type IndexerConfig = z.output<typeof indexerSchema>;
export type LauncherConfig = z.output<typeof launcherSchema>;

/** A configuration that cannot run; `problems` holds one readable line per broken setting. */
export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`Invalid configuration:\n${problems.map((problem) => `  ${problem}`).join("\n")}`);
    this.name = "ConfigError";
    this.problems = problems;
  }
}

type Environment = Record<string, string | undefined>;

function parseWith<Schema extends z.ZodType>(schema: Schema, env: Environment): z.output<Schema> {
  // An empty value means "not set", as in most .env tooling.
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== ""));
  const result = schema.safeParse(present, { reportInput: true });
  if (result.success) return result.data;
  throw new ConfigError(result.error.issues.map(describeIssue));
}

function describeIssue(issue: z.core.$ZodIssue): string {
  const name = issue.path.join(".");
  if (issue.code === "invalid_type" && issue.input === undefined) return `${name} is required`;
  return `${name} ${issue.message}`;
}

export function parseServiceConfig(env: Environment = process.env): ServiceConfig {
  return parseWith(serviceSchema, env);
}

export function parseIndexerConfig(env: Environment = process.env): IndexerConfig {
  return parseWith(indexerSchema, env);
}

export function parseLauncherConfig(env: Environment = process.env): LauncherConfig {
  return parseWith(launcherSchema, env);
}
