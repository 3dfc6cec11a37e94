import { privateKeyToAccount } from "viem/accounts";
import { z } from "zod";
import { checkMailSettings, mailConfig, mailSettings } from "./mailSettings.ts";
import {
  address,
  chainSettings,
  type Environment,
  httpUrl,
  parseWith,
  privateKey,
  wholeNumber,
} from "./settings.ts";
import { webhookConfig, webhookSettings } from "./webhookSettings.ts";

/**
 * The service process's settings (api/main.ts), read from the environment once at start.
 * A broken setting stops start-up with one line per problem.
 */

/** Where a crash test may make the process SIGKILL itself (api/crashHook.ts). */
export const CRASH_POINTS = [
  "after_payouts_signed",
  "after_payouts_broadcast",
  // A round stored while the one before it is still on its way to the node (payoutSender.ts).
  "after_next_round_signed",
  "after_x402_recorded",
  "after_x402_settled",
  // One-transaction settlement (docs/payments.md#one-transaction-settlement): the combined
  // transaction signed and stored, not sent; sent, nothing about it stored.
  "after_settle_and_pay_signed",
  "after_settle_and_pay_broadcast",
  // The mail flow (api/mail): a message stored, not acted on; a mail claim created, its
  // message not yet marked; an outbox mail taken, not yet handed to the SMTP server.
  "after_mail_stored",
  "after_mail_claim_created",
  "before_mail_sent",
  // Webhooks (api/webhooks): deliveries taken (their attempt counted), nothing sent; sent,
  // what the receivers answered not stored.
  "before_webhooks_sent",
  "after_webhooks_sent",
] as const;

/**
 * The service's settings, each with its default and what it means (`.describe`): the schema
 * below parses them, and docs/configuration.md is written from them (`npm run docs:config`).
 */
export const serviceSettings = {
  ...chainSettings,
  PAYOUT_PRIVATE_KEY: privateKey.describe(
    "Key that sends the 1 USDC payouts; its wallet holds USDC and ETH for gas. The devnet's `payout` account under `npm start`.",
  ),
  RECEIPT_SIGNER_PRIVATE_KEY: privateKey.describe(
    "Key that signs receipts (EIP-191); must differ from the payout key and holds nothing. The devnet's `receipt_signer` account under `npm start`.",
  ),
  ROLE: z
    .enum(["all", "api", "worker"], { message: "must be all, api or worker" })
    .default("all")
    .describe(
      "`all`: the HTTP surfaces and the workers; `api`: the surfaces only; `worker`: the workers only (one replica runs each worker loop at a time).",
    ),
  HOST: z.string().min(1).default("127.0.0.1").describe("Address the HTTP server listens on."),
  PORT: wholeNumber(0, 65535).default(3000).describe("Port the HTTP server listens on."),
  PUBLIC_URL: httpUrl
    .optional()
    .describe(
      "Base address clients reach the service at, used in links and the offer; unset: `http://localhost:$PORT`.",
    ),
  EXPLORER_URL: httpUrl.default("https://basescan.org").describe("Block explorer, for links."),
  PAYOUT_RPC_URL: httpUrl
    .optional()
    .describe(
      "The payouts' own RPC (the same chain as `RPC_URL`), so public reads and the rest of the service cannot use up its quota or stall payouts; unset: `RPC_URL`.",
    ),
  CONFIRMATIONS: wholeNumber(0, 1000)
    .default(3)
    .describe("Blocks on top of a payment before it counts (3 is about 6 s on Base)."),
  INDEXER_MAX_LAG_BLOCKS: wholeNumber(1)
    .default(15)
    .describe("Indexer lag, in blocks behind the head, beyond which health says `indexer_behind`."),
  MATCHING_VARIANT: z
    .enum(["A", "B"], { message: "must be A or B" })
    .default("A")
    .describe(
      "A: each claim gets a unique amount (10 USDC plus up to 0.999999) payable from any wallet, or at least 10 USDC from its payout address. B: 10 USDC from the payout address, or from any wallet with the transaction hash named on the claim ([matching](payments.md#matching)).",
    ),
  CLAIM_LIFETIME_SECONDS: wholeNumber(1)
    .default(7 * 24 * 3600)
    .describe("Unpaid claims expire after this long (7 days)."),
  EXPIRY_GRACE_SECONDS: wholeNumber(0)
    .default(15 * 60)
    .describe(
      "The expiry worker waits this much longer, so a payment mined just in time can confirm first.",
    ),
  AMOUNT_HOLD_SECONDS: wholeNumber(0)
    .default(30 * 24 * 3600)
    .describe(
      "Variant A: how long a claim's unique amount stays reserved after the claim expires (30 days).",
    ),
  AMOUNT_SPACE_SIZE: wholeNumber(1, 999_999)
    .default(999_999)
    .describe(
      "Variant A: how many unique amounts there are (suffixes 1 to N atomic units above the price).",
    ),
  AMOUNT_SPACE_WARN_RATIO: z.coerce
    .number({ message: "is not a number" })
    .gt(0, { message: "must be more than 0" })
    .max(1, { message: "must be at most 1" })
    .default(0.5)
    .describe(
      "Variant A: the share of the amount space held at which health says `amount_space_scarce`.",
    ),
  OPEN_CLAIMS_PER_CLIENT: wholeNumber(0)
    .default(20)
    .describe(
      "Open unpaid claims one client (an IPv4 address, an IPv6 /48, a mail sender) may hold; more are refused `too_many_open_claims`; 0: no cap.",
    ),
  MATCHER_INTERVAL_MS: wholeNumber(10, 60_000)
    .default(500)
    .describe(
      "How often the matcher looks for new confirmed transfers (it is also woken by each block the indexer commits live).",
    ),
  EXPIRY_INTERVAL_MS: wholeNumber(10, 3_600_000)
    .default(5_000)
    .describe("How often the expiry worker runs."),
  PAYOUT_INTERVAL_MS: wholeNumber(10, 60_000)
    .default(250)
    .describe("How often the payout sender looks for paid claims (it is also woken by NOTIFY)."),
  PAYOUT_CONFIRM_POLL_MS: wholeNumber(10, 60_000)
    .default(50)
    .describe("While payouts are in flight, the confirmer looks for them this often."),
  PAYOUT_BATCH_SIZE: wholeNumber(1, 2_000)
    .default(500)
    .describe(
      "Payouts signed and stored per round, with consecutive nonces; also how many mined payouts one round of the reorg watch looks at ([payout reorgs](operating.md#payout-reorgs)).",
    ),
  PAYOUT_GAS_LIMIT: wholeNumber(21_000, 1_000_000)
    .default(100_000)
    .describe("Gas limit of each payout transaction."),
  PAYOUT_MAX_FEE_GWEI: z.coerce
    .number({ message: "is not a number" })
    .positive({ message: "must be more than 0" })
    .default(10)
    .describe(
      "Fee cap per gas, in gwei: no payout is signed while the base fee is above it, and replacements stop at it.",
    ),
  PAYOUT_MIN_ETH: z.coerce
    .number({ message: "is not a number" })
    .nonnegative({ message: "must be 0 or more" })
    .default(0.0005)
    .describe(
      "ETH the payout wallet keeps beyond the gas of what it owes; below it nothing is signed and health says `payout_wallet_low_eth`.",
    ),
  PAYOUT_REBROADCAST_SECONDS: wholeNumber(1)
    .default(12)
    .describe("An unmined payout is sent again, the same bytes, after this long."),
  PAYOUT_REPLACE_SECONDS: wholeNumber(1)
    .default(30)
    .describe(
      "An unmined payout, or nonce filler, is replaced at the same nonce with higher fees after this long.",
    ),
  PAYOUT_CONFIRMATIONS: wholeNumber(1, 10_000)
    .default(30)
    .describe(
      "Blocks on top of a mined payout before it is final: until then the confirmer watches it and sends its bytes again if a reorg takes it away (30 blocks, a minute on Base, is deeper than any reorg its sequencer has produced).",
    ),
  PAYOUT_NONCE_GAP_SECONDS: wholeNumber(1)
    .default(120)
    .describe(
      "How long a nonce below our payouts stays empty (a foreign transaction from the payout key that was dropped) before a zero-value transaction to ourselves fills it.",
    ),
  PAYOUT_FOREIGN_NONCE_GRACE_SECONDS: wholeNumber(0)
    .default(30)
    .describe(
      "How long a payout's nonce must be seen used by a foreign transaction before health says `payout_nonce_taken` (a person re-issues it: `pay-and-earn reissue-payout <claim_id>`).",
    ),
  X402_FACILITATOR: z
    .enum(["local", "remote", "off"], { message: "must be local, remote or off" })
    .default("local")
    .describe(
      "`local`: verify and settle in-process, paying gas with `FACILITATOR_PRIVATE_KEY`; `remote`: a facilitator at `X402_FACILITATOR_URL`, or Coinbase CDP with its API keys; `off`: no x402.",
    ),
  FACILITATOR_PRIVATE_KEY: privateKey
    .optional()
    .describe(
      "Pays the gas of settlements (local facilitator, then required); must differ from the payout key. The devnet's `facilitator` account under `npm start`.",
    ),
  X402_FACILITATOR_URL: httpUrl.optional().describe("The remote facilitator's address."),
  SETTLE_AND_PAY_ADDRESS: address
    .optional()
    .describe(
      "The SettleAndPay contract ([one-transaction settlement](payments.md#one-transaction-settlement)): with the local facilitator, an x402 payment is settled and paid out in one transaction the payout wallet sends, which needs the payout wallet's USDC allowance to it ([set-up on Base](operating.md#settleandpay-on-base)). Unset: settle first, pay out in a second transaction. The devnet's own under `npm start`.",
    ),
  SETTLE_AND_PAY_GAS_LIMIT: wholeNumber(50_000, 1_000_000)
    .default(200_000)
    .describe(
      "Gas limit of each settle-and-pay transaction (the authorization's transfer and the payout's).",
    ),
  CDP_API_KEY_ID: z
    .string()
    .min(1)
    .optional()
    .describe("Coinbase CDP API key id (remote facilitator through `@coinbase/x402`)."),
  CDP_API_KEY_SECRET: z.string().min(1).optional().describe("Coinbase CDP API key secret."),
  X402_MAX_TIMEOUT_SECONDS: wholeNumber(30, 3600)
    .default(300)
    .describe("How long a client's authorization stays valid (`maxTimeoutSeconds` in the terms)."),
  X402_SETTLE_TIMEOUT_MS: wholeNumber(1_000, 600_000)
    .default(30_000)
    .describe(
      "How long a settlement may wait for its receipt before its outcome counts as unknown (202).",
    ),
  X402_PAYOUT_WAIT_MS: wholeNumber(0, 600_000)
    .default(15_000)
    .describe(
      "How long the paid request waits for its payout to be mined before answering without the receipt.",
    ),
  CRASH_AT: z
    .enum(CRASH_POINTS, { message: `must be one of ${CRASH_POINTS.join(", ")}` })
    .optional()
    .describe(
      `Test hook: the process SIGKILLs itself at this point (${CRASH_POINTS.join(", ")}; crash tests). Never set it in production.`,
    ),
  LOG_LEVEL: z
    .enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"], {
      message: "must be one of fatal, error, warn, info, debug, trace, silent",
    })
    .default("info")
    .describe("pino's level: fatal, error, warn, info, debug, trace or silent."),
  // ── HTTP hardening, health thresholds, metrics (api/web/middleware, api/metrics) ──
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
    .optional()
    .describe(
      "Proxies in front whose `X-Forwarded-For` is believed: `false`, their number (1 for one load balancer) or their addresses (`10.0.0.0/8`, `loopback`, …); unset means false, but with an https `PUBLIC_URL` the service then warns at start ([behind a load balancer](operating.md#rate-limits)).",
    ),
  RATE_LIMIT_ENABLED: z
    .enum(["true", "false"], { message: "must be true or false" })
    .default("true")
    .describe(
      "Per-client request limits, counted in PostgreSQL; `false` turns them off (tests, benchmarks).",
    ),
  RATE_LIMIT_WINDOW_SECONDS: wholeNumber(1, 86_400)
    .default(60)
    .describe("The rate limits' fixed window, from a client's first request."),
  RATE_LIMIT_READS: wholeNumber(1).default(600).describe("Reads one client may make per window."),
  RATE_LIMIT_WRITES: wholeNumber(1).default(60).describe("Writes one client may make per window."),
  RATE_LIMIT_COUNT_TIMEOUT_MS: wholeNumber(1, 60_000)
    .default(500)
    .describe(
      "How long a request waits for its count before reads go through uncounted and writes are refused (503), for 5 s.",
    ),
  METRICS_TOKEN: z
    .string()
    .min(16, { message: "must be at least 16 characters" })
    .optional()
    .describe(
      "When set, `GET /metrics` wants `Authorization: Bearer <token>`; required with an https `PUBLIC_URL`.",
    ),
  HEALTH_MATCHER_BACKLOG_SECONDS: wholeNumber(1)
    .default(60)
    .describe(
      "Health says `matcher_behind` when a confirmed payment has waited this long for the matcher.",
    ),
  HEALTH_PAYOUT_BACKLOG_SECONDS: wholeNumber(1)
    .default(120)
    .describe(
      "Health says `payouts_waiting` when a paid claim has waited this long for its payout, `payouts_unconfirmed` when a payout has for its block.",
    ),
  PUBLIC_RPC_READS_MAX_CONCURRENT: wholeNumber(1, 1000)
    .default(4)
    .describe(
      "RPC calls the public reads (`POST /api/receipts/verify`, `GET /api/payments/{tx}`) may have running at once per replica; beyond it they answer without the chain (verify) or 503 (payments).",
    ),
  A2A_TASK_TTL_SECONDS: wholeNumber(60)
    .default(7 * 24 * 3600)
    .describe(
      "An A2A task that names a claim is kept this long after its last change (7 days); then `GetTask` does not know it and it is deleted.",
    ),
  A2A_UNPAID_TASK_TTL_SECONDS: wholeNumber(60)
    .default(3600)
    .describe("The same for an A2A task that names no claim yet (it waits for an x402 payment)."),
  /** Tasks with a claim are capped by OPEN_CLAIMS_PER_CLIENT instead. */
  A2A_OPEN_TASKS_PER_CLIENT: wholeNumber(0)
    .default(20)
    .describe(
      "A2A tasks one client (an IPv4 address, an IPv6 /48) may hold waiting for an x402 payment, naming no claim yet; more are refused `too_many_open_tasks`; 0: no cap.",
    ),
  AGENT_ALLOWED_HOSTS: z
    .string()
    .refine(
      (value) =>
        value.trim() === "" ||
        value.split(",").every((entry) => /^(\[[\da-fA-F:.]+\]|[a-zA-Z\d.-]+)$/.test(entry.trim())),
      "must be host names separated by commas (no scheme, no port): api.example.com, [::1]",
    )
    .default("")
    .describe(
      "Host names `/mcp` and `/a2a` answer to besides `PUBLIC_URL`'s host and localhost (DNS-rebinding protection), comma-separated, no scheme or port: e.g. the names a proxy in front forwards.",
    ),
  // ── Abuse and slow dependencies: pools, database timeouts, server timeouts, read caches ──
  DATABASE_POOL_HTTP: wholeNumber(1, 1_000)
    .default(10)
    .describe("Database connections for the HTTP surfaces' queries."),
  DATABASE_POOL_WORKERS: wholeNumber(1, 1_000)
    .default(6)
    .describe(
      "Database connections for the workers' queries, besides the one each worker loop holds for its lock.",
    ),
  DATABASE_POOL_RATE_LIMITS: wholeNumber(1, 100)
    .default(2)
    .describe("Database connections for counting rate limits."),
  DATABASE_STATEMENT_TIMEOUT_MS: wholeNumber(0, 3_600_000)
    .default(15_000)
    .describe(
      "On every connection: a statement running longer is cancelled (the request answers 503); 0 turns it off.",
    ),
  DATABASE_LOCK_TIMEOUT_MS: wholeNumber(0, 3_600_000)
    .default(5_000)
    .describe(
      "On every connection: a lock (row or advisory) waited for longer is given up; 0 turns it off.",
    ),
  DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS: wholeNumber(0, 3_600_000)
    .default(60_000)
    .describe(
      "On every connection: a session idle inside a transaction longer is closed; 0 turns it off.",
    ),
  HTTP_HEADERS_TIMEOUT_MS: wholeNumber(1_000, 600_000)
    .default(10_000)
    .describe(
      "Time for a client's headers (slow headers get a 408); at most `HTTP_REQUEST_TIMEOUT_MS`.",
    ),
  HTTP_REQUEST_TIMEOUT_MS: wholeNumber(1_000, 3_600_000)
    .default(30_000)
    .describe("Time for a client's whole request."),
  HTTP_KEEP_ALIVE_TIMEOUT_MS: wholeNumber(1_000, 600_000)
    .default(5_000)
    .describe(
      "Idle time between requests on a keep-alive connection (behind a load balancer, above the balancer's own).",
    ),
  HTTP_MAX_CONNECTIONS: wholeNumber(1, 1_000_000)
    .default(1_000)
    .describe("Open connections at most; more are dropped at once."),
  HTTP_IDLE_TIMEOUT_MS: wholeNumber(1_000, 3_600_000)
    .default(120_000)
    .describe("A socket silent both ways this long, mid-request or mid-answer, is closed."),
  HTTP_CONNECTIONS_PER_IP: wholeNumber(0, 1_000_000)
    .default(100)
    .describe(
      "Connections one client address (IPv6: its /64) may hold at once; 0: no cap (the devnet's). Peers listed in `TRUST_PROXY` are not capped; with `TRUST_PROXY` a number of hops the cap is off.",
    ),
  READ_CACHE_MS: wholeNumber(0, 60_000)
    .default(2_000)
    .describe(
      "How long health, metrics, the ledger's totals and GraphQL stats, and the chain status of verified receipts and looked-up payments are shared between requests.",
    ),
  // ── end of HTTP hardening, health thresholds, metrics ──
  // ── The mail flow (api/config/mailSettings.ts) ──
  ...mailSettings,
  // ── Events: webhooks, A2A push notifications, live streams (api/config/webhookSettings.ts) ──
  ...webhookSettings,
};

const serviceSchema = z
  .object(serviceSettings)
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
        /** Null: the two-transaction path (settle, then pay out). Only with the local facilitator. */
        settleAndPay:
          settings.SETTLE_AND_PAY_ADDRESS && settings.X402_FACILITATOR === "local"
            ? {
                address: settings.SETTLE_AND_PAY_ADDRESS,
                gasLimit: BigInt(settings.SETTLE_AND_PAY_GAS_LIMIT),
              }
            : null,
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
      webhooks: webhookConfig(settings),
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
