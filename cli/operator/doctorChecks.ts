import { formatEther } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { readIndexedBlock } from "../../api/chain/indexedBlock.ts";
import type { ServiceConfig } from "../../api/config/serviceConfig.ts";
import { readMigrations } from "../../api/db/migrate.ts";
import { readAttention } from "../../api/health/readAttention.ts";
import { readOutboxStatus } from "../../api/mailbox/mailStatus.ts";
import { formatUsdc } from "../../api/money.ts";
import { readPayoutFunding } from "../../api/payouts/payoutFunding.ts";
import { HEALTH_REASONS } from "../../api/reasons/reasonCatalog.ts";
import { healthResponse } from "../../api/schemas/health.ts";
import { offerResponse } from "../../api/schemas/responses.ts";
import { withTimeout } from "../../api/withTimeout.ts";
import { reasonOfError } from "../errors.ts";
import { checkReceiptOffline } from "../receiptCheck.ts";
import type { OperatorConnections } from "./operatorContext.ts";

export type Verdict = "ok" | "warn" | "fail";

export interface Finding {
  check: string;
  verdict: Verdict;
  detail: string;
  /** What to do about a warn or a fail. */
  action?: string;
}

/** Days of payouts below which the payout wallet's runway is a warning. */
const RUNWAY_WARN_DAYS = 7;
const TIMEOUT_MS = 5_000;

type Check = (config: ServiceConfig, connections: OperatorConnections) => Promise<Finding[]>;

/**
 * What `doctor` looks at, in order, each one on its own: a failing check never hides the
 * others. The configuration check runs first and on its own (cli/operator/doctorCommand.ts).
 */
export const DOCTOR_CHECKS: Check[] = [
  checkRpc,
  checkDatabase,
  checkIndexer,
  checkPayoutWallet,
  checkReceiptKey,
  checkMail,
  checkAttention,
  checkRunningService,
];

async function checkRpc(config: ServiceConfig, { chain }: OperatorConnections): Promise<Finding[]> {
  try {
    const [chainId, head] = await withTimeout(
      Promise.all([chain.getChainId(), chain.getBlockNumber()]),
      TIMEOUT_MS,
      "the RPC",
    );
    if (chainId !== config.chain.chainId) {
      return [
        fail(
          "rpc",
          `RPC_URL serves chain ${chainId}, CHAIN_ID is ${config.chain.chainId}`,
          `point RPC_URL at a node of chain ${config.chain.chainId}`,
        ),
      ];
    }
    return [ok("rpc", `chain ${chainId}, head block ${head}`)];
  } catch (error) {
    return [
      fail(
        "rpc",
        `RPC_URL does not answer: ${reasonOfError(error)}`,
        "check RPC_URL and the node behind it",
      ),
    ];
  }
}

async function checkDatabase(
  _config: ServiceConfig,
  { sql }: OperatorConnections,
): Promise<Finding[]> {
  try {
    await withTimeout(sql`select 1`, TIMEOUT_MS, "the database");
  } catch (error) {
    return [
      fail(
        "database",
        `DATABASE_URL does not answer: ${reasonOfError(error)}`,
        "check DATABASE_URL and that PostgreSQL runs",
      ),
    ];
  }
  const known = await readMigrations();
  const applied = await sql<{ id: number }[]>`select id from app.schema_migrations`.catch(() => []);
  const appliedIds = new Set(applied.map((row) => row.id));
  const pending = known.filter((migration) => !appliedIds.has(migration.id));
  const newest = Math.max(0, ...known.map((migration) => migration.id));
  const unknown = [...appliedIds].filter((id) => id > newest);
  if (pending.length > 0) {
    return [
      ok("database", "answers"),
      warn(
        "migrations",
        `${pending.length} of ${known.length} not applied (${pending.map((m) => m.id).join(", ")})`,
        "start the service: it applies them at start",
      ),
    ];
  }
  if (unknown.length > 0) {
    return [
      ok("database", "answers"),
      warn(
        "migrations",
        `the database has migrations this code does not know (${unknown.join(", ")})`,
        "run the doctor of the version that is deployed",
      ),
    ];
  }
  return [ok("database", "answers"), ok("migrations", `all ${known.length} applied`)];
}

async function checkIndexer(
  config: ServiceConfig,
  { sql, chain }: OperatorConnections,
): Promise<Finding[]> {
  try {
    const [indexed, head] = await withTimeout(
      Promise.all([readIndexedBlock(sql, config.chain.chainId), chain.getBlockNumber()]),
      TIMEOUT_MS,
      "the indexer",
    );
    if (indexed === null) {
      return [
        fail(
          "indexer",
          HEALTH_REASONS.indexer_not_ready,
          "start Ponder (npm start starts it) and let it finish its backfill",
        ),
      ];
    }
    const lag = Number(head - indexed);
    const detail = `Ponder has indexed block ${indexed}, ${Math.max(0, lag)} behind the head`;
    if (lag > config.indexer.maxLagBlocks) {
      return [
        warn(
          "indexer",
          `${detail} (more than INDEXER_MAX_LAG_BLOCKS=${config.indexer.maxLagBlocks})`,
          "look at Ponder's log and its RPC: payments wait until it catches up",
        ),
      ];
    }
    return [ok("indexer", detail)];
  } catch (error) {
    return [
      fail(
        "indexer",
        `cannot read Ponder's progress: ${reasonOfError(error)}`,
        "fix the database and RPC checks above first",
      ),
    ];
  }
}

async function checkPayoutWallet(
  config: ServiceConfig,
  { sql, chain }: OperatorConnections,
): Promise<Finding[]> {
  try {
    const funding = await withTimeout(
      readPayoutFunding({ sql, chain, config }),
      TIMEOUT_MS,
      "the payout wallet",
    );
    const [rate] = await sql<{ payouts: number }[]>`
      select count(*)::int as payouts from app.payouts
      where status = 'confirmed' and confirmed_at > now() - interval '7 days'`;
    const perDay = (rate?.payouts ?? 0) / 7;
    const covered = Math.min(funding.coveredByUsdc, funding.coveredByEth);
    const balances = `${funding.wallet} holds ${formatUsdc(funding.usdcBalance)} USDC and ${formatEther(funding.ethBalance)} ETH: ${Math.max(0, covered)} more payouts`;
    if (covered < 1) {
      const short = funding.coveredByUsdc < 1 ? "USDC" : "ETH (gas)";
      return [
        fail(
          "payout wallet",
          `${balances}; it cannot pay the next payout`,
          `send ${short} to ${funding.wallet}: claims wait in paid until then`,
        ),
      ];
    }
    if (perDay === 0) return [ok("payout wallet", `${balances}; no payouts in the last 7 days`)];
    const days = covered / perDay;
    const runway = `${balances}, ${days.toFixed(1)} days at ${perDay.toFixed(1)} payouts a day (last 7 days)`;
    if (days < RUNWAY_WARN_DAYS) {
      return [
        warn(
          "payout wallet",
          runway,
          `top up ${funding.wallet} with USDC and ETH for the weeks ahead`,
        ),
      ];
    }
    return [ok("payout wallet", runway)];
  } catch (error) {
    return [
      fail(
        "payout wallet",
        `cannot read its balances: ${reasonOfError(error)}`,
        "fix the database and RPC checks above first",
      ),
    ];
  }
}

/** The receipt key signs, and what it signs checks out as the receipts' signer. */
async function checkReceiptKey(config: ServiceConfig): Promise<Finding[]> {
  const account = privateKeyToAccount(config.receipts.privateKey);
  const message = `pay-and-earn receipt\nClaim: doctor-${Date.now()}`;
  const signature = await account.signMessage({ message });
  const verdict = await checkReceiptOffline({ message, signature }, config.receipts.signer);
  if (!verdict.valid) {
    return [
      fail(
        "receipt key",
        `a test signature does not verify (${verdict.reason})`,
        "check RECEIPT_SIGNER_PRIVATE_KEY",
      ),
    ];
  }
  return [
    ok(
      "receipt key",
      `signs as ${config.receipts.signer} (published in the offer as receipt_signer), separate from the payout key`,
    ),
  ];
}

async function checkMail(config: ServiceConfig, { sql }: OperatorConnections): Promise<Finding[]> {
  const { mail } = config;
  const intake =
    mail.intake === "off" ? "intake off" : `intake ${mail.intake} for ${mail.intakeAddress}`;
  const findings: Finding[] = [];
  if (!mail.smtpUrl) {
    findings.push(
      warn(
        "mail",
        `${intake}; SMTP_URL is unset: receipt mails wait in the outbox`,
        "set SMTP_URL (and DKIM_PRIVATE_KEY, DKIM_SELECTOR) to send them",
      ),
    );
  } else if (!mail.dkim) {
    findings.push(
      warn(
        "mail",
        `${intake}; sending without DKIM: receivers may file the mails as spam`,
        "set DKIM_PRIVATE_KEY and DKIM_SELECTOR",
      ),
    );
  } else {
    findings.push(
      ok("mail", `${intake}; sending from ${mail.from}, DKIM selector ${mail.dkim.keySelector}`),
    );
  }
  const outbox = await readOutboxStatus(sql).catch(() => null);
  if (outbox && outbox.failedLastDay > 0) {
    findings.push(
      warn(
        "mail outbox",
        `${outbox.failedLastDay} mails failed for good in the last 24 hours`,
        "look at app.outbox's last_error",
      ),
    );
  }
  return findings;
}

async function checkAttention(
  _config: ServiceConfig,
  { sql }: OperatorConnections,
): Promise<Finding[]> {
  const attention = await readAttention(sql).catch(() => null);
  if (!attention) return [];
  const waiting = Object.entries(attention).filter(([, count]) => count > 0);
  if (waiting.length === 0) return [ok("attention", "nothing waits for a person")];
  return waiting.map(([reason, count]) =>
    warn(
      "attention",
      `${count} × ${reason}: ${HEALTH_REASONS[reason as keyof typeof HEALTH_REASONS]}`,
      "pay-and-earn payouts --stuck lists them",
    ),
  );
}

/**
 * The service at PUBLIC_URL, as its clients see it: its own health verdict, and the receipt
 * signer its offer publishes, which must be this configuration's (else receipts it signs and
 * receipts clients check against the offer disagree).
 */
async function checkRunningService(config: ServiceConfig): Promise<Finding[]> {
  const base = config.http.publicUrl;
  const read = async (path: string) => {
    const response = await fetch(`${base}${path}`, {
      headers: { accept: "application/json" },
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    return { status: response.status, body: (await response.json()) as unknown };
  };
  let health: { status: number; body: unknown };
  let info: { status: number; body: unknown };
  try {
    [health, info] = await Promise.all([read("/api/health"), read("/api/info")]);
  } catch (error) {
    return [
      warn(
        "service",
        `${base} does not answer: ${reasonOfError(error)}`,
        "start the service, or set PUBLIC_URL to where it runs",
      ),
    ];
  }
  const report = healthResponse.safeParse(health.body);
  const offer = offerResponse.safeParse(info.body);
  if (!report.success || !offer.success) {
    return [
      warn(
        "service",
        `${base} answers, but not as pay-and-earn of this version`,
        "check PUBLIC_URL",
      ),
    ];
  }
  const findings: Finding[] = [];
  if (offer.data.receipt_signer !== config.receipts.signer) {
    findings.push(
      fail(
        "service",
        `${base} publishes receipt signer ${offer.data.receipt_signer}, this configuration signs as ${config.receipts.signer}`,
        "run doctor with the service's own environment, or fix RECEIPT_SIGNER_PRIVATE_KEY where they differ",
      ),
    );
  }
  const { status, reasons } = report.data;
  if (status === "ok") findings.push(ok("service", `${base} says ok`));
  else {
    const words = reasons.map((reason) => `${reason} (${HEALTH_REASONS[reason]})`).join("; ");
    findings.push(
      (status === "down" ? fail : warn)(
        "service",
        `${base} says ${status}: ${words}`,
        "see the checks above and GET /api/health",
      ),
    );
  }
  return findings;
}

const ok = (check: string, detail: string): Finding => ({ check, verdict: "ok", detail });
const warn = (check: string, detail: string, action: string): Finding => ({
  check,
  verdict: "warn",
  detail,
  action,
});
const fail = (check: string, detail: string, action: string): Finding => ({
  check,
  verdict: "fail",
  detail,
  action,
});

export { fail as failFinding, ok as okFinding, warn as warnFinding };
