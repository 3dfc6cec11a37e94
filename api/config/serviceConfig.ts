import { privateKeyToAccount } from "viem/accounts";
import { z } from "zod";
import { checkMailSettings, mailConfig, mailSettings } from "./mailSettings.ts";
import {
  chainSettings,
  type Environment,
  httpUrl,
  parseWith,
  privateKey,
  wholeNumber,
} from "./settings.ts";

/**
 * The service process's settings (api/main.ts), read from the environment once at start.
 * `.env.example` documents each one; a broken setting stops start-up with one line per problem.
 */

/** Where a crash test may make the process SIGKILL itself (api/crashHook.ts). */
export const CRASH_POINTS = [
  "after_payouts_signed",
  "after_payouts_broadcast",
  // A round stored while the one before it is still on its way to the node (payoutSender.ts).
  "after_next_round_signed",
  "after_x402_recorded",
  "after_x402_settled",
  // The mail flow (api/mail): a message stored, not acted on; a mail claim created, its
  // message not yet marked; an outbox mail taken, not yet handed to the SMTP server.
  "after_mail_stored",
  "after_mail_claim_created",
  "before_mail_sent",
] as const;

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
    /**
     * The payouts' own RPC (same chain as RPC_URL), so that public reads and everything else on
     * RPC_URL cannot use up its quota or stall payouts; RPC_URL when unset.
     */
    PAYOUT_RPC_URL: httpUrl.optional(),
    CONFIRMATIONS: wholeNumber(0, 1000).default(3),
    INDEXER_MAX_LAG_BLOCKS: wholeNumber(1).default(15),
    MATCHING_VARIANT: z.enum(["A", "B"], { message: "must be A or B" }).default("A"),
    CLAIM_LIFETIME_SECONDS: wholeNumber(1).default(7 * 24 * 3600),
    EXPIRY_GRACE_SECONDS: wholeNumber(0).default(15 * 60),
    AMOUNT_HOLD_SECONDS: wholeNumber(0).default(30 * 24 * 3600),
    /** Variant A: how many unique amounts there are (suffixes 1..N atomic units above the price). */
    AMOUNT_SPACE_SIZE: wholeNumber(1, 999_999).default(999_999),
    /** Variant A: the share of the amount space held at which health says `amount_space_scarce`. */
    AMOUNT_SPACE_WARN_RATIO: z.coerce
      .number({ message: "is not a number" })
      .gt(0, { message: "must be more than 0" })
      .max(1, { message: "must be at most 1" })
      .default(0.5),
    /** Open unpaid claims one client (an IPv4 address, an IPv6 /48, a mail sender) may hold; 0: no cap. */
    OPEN_CLAIMS_PER_CLIENT: wholeNumber(0).default(20),
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
    /** Blocks on top of a mined payout before it is final (watched, re-sent if it disappears). */
    PAYOUT_CONFIRMATIONS: wholeNumber(1, 10_000).default(30),
    /** How long an empty nonce below our payouts waits before a zero-value filler takes it. */
    PAYOUT_NONCE_GAP_SECONDS: wholeNumber(1).default(120),
    /** How long a payout's nonce is seen used by a foreign transaction before it needs a person. */
    PAYOUT_FOREIGN_NONCE_GRACE_SECONDS: wholeNumber(0).default(30),
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
      // Unset means false, but is told apart from an explicit false (see startupWarnings).
      .optional(),
    RATE_LIMIT_ENABLED: z
      .enum(["true", "false"], { message: "must be true or false" })
      .default("true"),
    RATE_LIMIT_WINDOW_SECONDS: wholeNumber(1, 86_400).default(60),
    RATE_LIMIT_READS: wholeNumber(1).default(600),
    RATE_LIMIT_WRITES: wholeNumber(1).default(60),
    RATE_LIMIT_COUNT_TIMEOUT_MS: wholeNumber(1, 60_000).default(500),
    METRICS_TOKEN: z.string().min(16, { message: "must be at least 16 characters" }).optional(),
    HEALTH_MATCHER_BACKLOG_SECONDS: wholeNumber(1).default(60),
    HEALTH_PAYOUT_BACKLOG_SECONDS: wholeNumber(1).default(120),
    /**
     * Host names /mcp and /a2a answer to (DNS-rebinding protection), comma-separated, besides
     * PUBLIC_URL's host and localhost: e.g. the names a proxy in front forwards.
     */
    /**
     * RPC calls the public reads (POST /api/receipts/verify, GET /api/payments/{tx}) may have
     * running at once; beyond it they answer without the chain (verify) or 503 (payments).
     */
    PUBLIC_RPC_READS_MAX_CONCURRENT: wholeNumber(1, 1000).default(4),
    /** How long an A2A task that names a claim is kept after its last change. */
    A2A_TASK_TTL_SECONDS: wholeNumber(60).default(7 * 24 * 3600),
    /** How long an A2A task that names no claim yet (it waits for an x402 payment) is kept. */
    A2A_UNPAID_TASK_TTL_SECONDS: wholeNumber(60).default(3600),
    /**
     * A2A tasks one client (an IPv4 address, an IPv6 /48) may hold that wait for an x402 payment
     * and name no claim yet; 0: no cap. Tasks with a claim are capped by OPEN_CLAIMS_PER_CLIENT.
     */
    A2A_OPEN_TASKS_PER_CLIENT: wholeNumber(0).default(20),
    AGENT_ALLOWED_HOSTS: z
      .string()
      .refine(
        (value) =>
          value.trim() === "" ||
          value
            .split(",")
            .every((entry) => /^(\[[\da-fA-F:.]+\]|[a-zA-Z\d.-]+)$/.test(entry.trim())),
        "must be host names separated by commas (no scheme, no port): api.example.com, [::1]",
      )
      .default(""),
    // ── Abuse and slow dependencies: pools, database timeouts, server timeouts, read caches ──
    /** Connections for the HTTP surfaces' queries. */
    DATABASE_POOL_HTTP: wholeNumber(1, 1_000).default(10),
    /** Connections for the workers' queries, besides the one each worker loop holds for its lock. */
    DATABASE_POOL_WORKERS: wholeNumber(1, 1_000).default(6),
    /** Connections for counting rate limits. */
    DATABASE_POOL_RATE_LIMITS: wholeNumber(1, 100).default(2),
    /** 0 turns each one off. */
    DATABASE_STATEMENT_TIMEOUT_MS: wholeNumber(0, 3_600_000).default(15_000),
    DATABASE_LOCK_TIMEOUT_MS: wholeNumber(0, 3_600_000).default(5_000),
    DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS: wholeNumber(0, 3_600_000).default(60_000),
    HTTP_HEADERS_TIMEOUT_MS: wholeNumber(1_000, 600_000).default(10_000),
    HTTP_REQUEST_TIMEOUT_MS: wholeNumber(1_000, 3_600_000).default(30_000),
    HTTP_KEEP_ALIVE_TIMEOUT_MS: wholeNumber(1_000, 600_000).default(5_000),
    HTTP_MAX_CONNECTIONS: wholeNumber(1, 1_000_000).default(1_000),
    /** A socket with no traffic either way this long, mid-request or mid-answer, is closed. */
    HTTP_IDLE_TIMEOUT_MS: wholeNumber(1_000, 3_600_000).default(120_000),
    /** Connections one client address (IPv6: its /64) may hold at once; 0: no cap. */
    HTTP_CONNECTIONS_PER_IP: wholeNumber(0, 1_000_000).default(100),
    /** How long health, metrics, ledger totals and GraphQL stats answers are shared. */
    READ_CACHE_MS: wholeNumber(0, 60_000).default(2_000),
    // ── end of HTTP hardening, health thresholds, metrics ──
    // ── The mail flow (api/config/mailSettings.ts) ──
    ...mailSettings,
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
    if (settings.PUBLIC_URL?.startsWith("https://") && !settings.METRICS_TOKEN) {
      context.addIssue({
        code: "custom",
        path: ["METRICS_TOKEN"],
        message:
          "is required when PUBLIC_URL is https, or GET /metrics is open to the internet: set a random token of 16 characters or more",
      });
    }
    if (settings.HTTP_HEADERS_TIMEOUT_MS > settings.HTTP_REQUEST_TIMEOUT_MS) {
      context.addIssue({
        code: "custom",
        path: ["HTTP_HEADERS_TIMEOUT_MS"],
        message: "must not exceed HTTP_REQUEST_TIMEOUT_MS (the headers are part of the request)",
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
    checkMailSettings(settings, context);
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
        payoutRpcUrl: settings.PAYOUT_RPC_URL ?? settings.RPC_URL,
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
        amountSpaceSize: settings.AMOUNT_SPACE_SIZE,
        amountSpaceWarnRatio: settings.AMOUNT_SPACE_WARN_RATIO,
        openClaimsPerClient: settings.OPEN_CLAIMS_PER_CLIENT,
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
        confirmations: settings.PAYOUT_CONFIRMATIONS,
        nonceGapMs: settings.PAYOUT_NONCE_GAP_SECONDS * 1000,
        foreignNonceGraceMs: settings.PAYOUT_FOREIGN_NONCE_GRACE_SECONDS * 1000,
      },
      databaseUrl: settings.DATABASE_URL,
      payout: { privateKey: settings.PAYOUT_PRIVATE_KEY, address: payoutAccount.address },
      receipts: { privateKey: settings.RECEIPT_SIGNER_PRIVATE_KEY, signer: receiptSigner.address },
      logLevel: settings.LOG_LEVEL,
      // ── HTTP hardening, health thresholds, metrics ──
      trustProxy: trustProxySetting(settings.TRUST_PROXY ?? "false"),
      rateLimits: {
        enabled: settings.RATE_LIMIT_ENABLED === "true",
        windowSeconds: settings.RATE_LIMIT_WINDOW_SECONDS,
        reads: settings.RATE_LIMIT_READS,
        writes: settings.RATE_LIMIT_WRITES,
        countTimeoutMs: settings.RATE_LIMIT_COUNT_TIMEOUT_MS,
      },
      metrics: { token: settings.METRICS_TOKEN },
      health: {
        matcherBacklogSeconds: settings.HEALTH_MATCHER_BACKLOG_SECONDS,
        payoutBacklogSeconds: settings.HEALTH_PAYOUT_BACKLOG_SECONDS,
      },
      publicChainReads: { maxConcurrent: settings.PUBLIC_RPC_READS_MAX_CONCURRENT },
      agents: {
        /** Extra host names for /mcp and /a2a (PUBLIC_URL's host and localhost always pass). */
        allowedHosts: settings.AGENT_ALLOWED_HOSTS.split(",")
          .map((entry) => entry.trim().toLowerCase())
          .filter((entry) => entry !== ""),
        taskLifetimes: {
          withClaimSeconds: settings.A2A_TASK_TTL_SECONDS,
          unpaidSeconds: settings.A2A_UNPAID_TASK_TTL_SECONDS,
        },
        openTasksPerClient: settings.A2A_OPEN_TASKS_PER_CLIENT,
      },
      databasePools: {
        http: settings.DATABASE_POOL_HTTP,
        workers: settings.DATABASE_POOL_WORKERS,
        rateLimits: settings.DATABASE_POOL_RATE_LIMITS,
      },
      databaseTimeouts: {
        statementMs: settings.DATABASE_STATEMENT_TIMEOUT_MS,
        lockMs: settings.DATABASE_LOCK_TIMEOUT_MS,
        idleInTransactionMs: settings.DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS,
      },
      httpServer: {
        headersTimeoutMs: settings.HTTP_HEADERS_TIMEOUT_MS,
        requestTimeoutMs: settings.HTTP_REQUEST_TIMEOUT_MS,
        keepAliveTimeoutMs: settings.HTTP_KEEP_ALIVE_TIMEOUT_MS,
        maxConnections: settings.HTTP_MAX_CONNECTIONS,
        idleTimeoutMs: settings.HTTP_IDLE_TIMEOUT_MS,
        connectionsPerIp: settings.HTTP_CONNECTIONS_PER_IP,
      },
      readCacheMs: settings.READ_CACHE_MS,
      /** Said once at start (the service logs each): settings that work but are likely wrong. */
      warnings: startupWarnings(settings),
      // ── end of HTTP hardening, health thresholds, metrics ──
      mail: mailConfig(settings),
    };
  });

function trustProxySetting(value: string): false | number | string[] {
  if (value === "false") return false;
  if (/^\d+$/.test(value)) return Number(value);
  return value.split(",").map((entry) => entry.trim());
}

function startupWarnings(settings: { PUBLIC_URL?: string | undefined; TRUST_PROXY?: string }) {
  const warnings: string[] = [];
  if (settings.PUBLIC_URL?.startsWith("https://") && settings.TRUST_PROXY === undefined) {
    warnings.push(
      "PUBLIC_URL is https but TRUST_PROXY is unset: behind a TLS-terminating proxy every client " +
        "has the proxy's address and shares one rate limit. Set TRUST_PROXY to the proxies in " +
        "front (1, or their addresses), or to false if clients reach this process directly.",
    );
  }
  return warnings;
}

export type ServiceConfig = z.output<typeof serviceSchema>;

export function parseServiceConfig(env: Environment = process.env): ServiceConfig {
  return parseWith(serviceSchema, env);
}
