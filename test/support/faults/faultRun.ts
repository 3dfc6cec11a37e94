import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectDatabase, type Database } from "../../../api/db/connect.ts";
import { addOperatorEndpoint } from "../../../api/webhooks/webhookEndpoints.ts";
import { startTestChain, type TestChain } from "../chain.ts";
import { startTestMailCatcher } from "../mail.ts";
import { callDevnetToken } from "../payouts.ts";
import { type RpcProxy, startRpcProxy } from "../rpcProxy.ts";
import { testServiceEnv } from "../service.ts";
import { USDC } from "../usdc.ts";
import { waitFor } from "../waitFor.ts";
import { startWebhookReceiver } from "../webhookReceiver.ts";
import { checkInvariants, settled, type Verdict } from "./invariants.ts";
import { type PaymentStream, startPaymentStream } from "./paymentStream.ts";
import { depthOfRecentTransaction, reorganise } from "./reorgs.ts";
import { type RestartablePostgres, startRestartablePostgres } from "./restartablePostgres.ts";
import { createRpcFaults } from "./rpcFaults.ts";
import {
  createReplicas,
  describePayoutLock,
  payoutLockHolder,
  type Replica,
  type Replicas,
} from "./serviceReplicas.ts";
import { createSupervisedIndexer } from "./supervisedIndexer.ts";
import { countWebhookDeliveries, type WebhookCount } from "./webhookCount.ts";

export type FaultForm = "short" | "long";

/** Settings of the service under test: short loops, and depths a 1 s chain reaches quickly. */
export const CONFIRMATIONS = 3;
export const PAYOUT_CONFIRMATIONS = 8;
/** Where the mail lane writes (every replica's SMTP intake takes mail for it). */
const INTAKE_ADDRESS = "earn@pay-and-earn.test";
/** Longer than the service's RPC read timeout (5 s): a call that never comes back. */
const RPC_TIMEOUT_FAULT_MS = 6_000;

/** How many of each fault one run injects (RPC faults are a rate over every call instead). */
const SCHEDULES: Record<
  FaultForm,
  { rounds: number; killsPerRound: number; rpcFaultRate: number }
> = {
  short: { rounds: 1, killsPerRound: 4, rpcFaultRate: 0.05 },
  // ≥ 50 SIGKILL cycles, and every other fault ten times over.
  long: { rounds: 10, killsPerRound: 5, rpcFaultRate: 0.05 },
};

export interface FaultCounts {
  sigkill: number;
  rpc: Record<string, number>;
  postgres_restart: number;
  reorg_shallow: number;
  settlements_dropped_by_reorg: number;
  reorg_deep: number;
  /** Deep reorgs whose new branch mined the old transactions lower than before. */
  reorg_deep_remined_lower: number;
  reorg_dropping_payout: number;
  payouts_dropped_by_reorg: number;
  ponder_restart: number;
  ponder_new_build_schema: number;
  ponder_died_and_restarted: number;
  payout_lock_holder_killed: number;
}

export interface FaultReport {
  variant: "A" | "B";
  form: FaultForm;
  seconds: number;
  payments: Record<string, number>;
  clientOutcomes: Record<string, number>;
  /** Lanes whose payment attempt threw (the first few, then how many). */
  clientErrors: string[];
  faults: FaultCounts;
  takeoverMs: number[];
  verdict: Verdict;
  /** Webhook deliveries to the operator's receiver, counted against the state changes. */
  webhooks: WebhookCount;
}

/** Of the receiver's answers: a 503 this often, no answer at all (the service times out) this often. */
const RECEIVER_FAILS = 0.1;
const RECEIVER_HANGS = 0.02;

/** A short random pause between two faults (the stream runs on meanwhile). */
const jitter = (fromMs: number, toMs: number) =>
  new Promise((resolve) => setTimeout(resolve, fromMs + Math.random() * (toMs - fromMs)));

/**
 * The fault suite for one matching variant: its own Anvil (a block a second), its own
 * PostgreSQL (restartable without touching anyone else's), Ponder under a supervisor, the
 * service as real processes behind the suite's JSON-RPC proxy, and a stream of payments, while
 * the faults are injected in turn. The verdict comes from the chain and the database.
 */
export async function startFaultRun(variant: "A" | "B", form: FaultForm) {
  const schedule = SCHEDULES[form];
  const [chain, database, catcher, receiver] = await Promise.all([
    startTestChain({ blockTimeSeconds: 1 }),
    startRestartablePostgres(),
    // The mail server the service's mail goes out to (replies and receipts): never faulted.
    startTestMailCatcher(),
    // The operator's webhook receiver: it verifies every signature, fails a tenth of the
    // requests and leaves a few unanswered; the service must still deliver every event.
    startWebhookReceiver({
      answer: () => {
        const draw = Math.random();
        return draw < RECEIVER_HANGS
          ? "handled"
          : draw < RECEIVER_HANGS + RECEIVER_FAILS
            ? 503
            : 200;
      },
    }),
  ]);
  const proxy: RpcProxy = await startRpcProxy(chain.rpcUrl);
  const rpcFaults = createRpcFaults({
    rate: schedule.rpcFaultRate,
    timeoutMs: RPC_TIMEOUT_FAULT_MS,
  });
  proxy.rule = rpcFaults.rule;
  const indexer = createSupervisedIndexer(chain, database.url);
  await indexer.start();
  const replicas: Replicas = createReplicas(({ port, smtpPort }) =>
    testServiceEnv({ rpcUrl: proxy.url, accounts: chain.accounts }, database.url, {
      PORT: String(port),
      ROLE: "all",
      MATCHING_VARIANT: variant,
      CONFIRMATIONS: String(CONFIRMATIONS),
      PAYOUT_CONFIRMATIONS: String(PAYOUT_CONFIRMATIONS),
      MATCHER_INTERVAL_MS: "100",
      PAYOUT_INTERVAL_MS: "100",
      PAYOUT_REBROADCAST_SECONDS: "3",
      PAYOUT_REPLACE_SECONDS: "20",
      X402_SETTLE_TIMEOUT_MS: "8000",
      X402_PAYOUT_WAIT_MS: "3000",
      // Authorizations valid for 60 s: an x402 settlement a reorg drops can be settled again for
      // ~50 s (VALIDITY_MARGIN_SECONDS), and one never settled fails soon after the stream stops.
      X402_MAX_TIMEOUT_SECONDS: "60",
      // The mail lane: an SMTP intake per replica, the replies and receipts to the catcher.
      MAIL_INTAKE: "smtp",
      SMTP_INTAKE_PORT: String(smtpPort),
      MAIL_INTAKE_ADDRESS: INTAKE_ADDRESS,
      SMTP_URL: catcher.url,
      MAIL_REQUIRE_AUTH: "false",
      MAIL_RETRY_SECONDS: "1",
      MAIL_REPLIES_PER_HOUR: "100000",
      // Every mail lane writes from 127.0.0.1 and one domain (client.test): the per-address and
      // per-domain limits would make the long form's later mails wait an hour (they did: 10 of
      // 60 unanswered when the run ended). Those limits have tests of their own.
      MAIL_REPLIES_PER_DOMAIN_PER_HOUR: "100000",
      MAIL_SMTP_MESSAGES_PER_IP_PER_HOUR: "100000",
      MAIL_SMTP_CONNECTIONS_PER_IP: "1000",
      // Webhooks: retried soon and often enough that a flaky receiver loses nothing in the
      // run (8 retries over ~33 s), a silent one given up after 2 s, no endpoint disabled.
      WEBHOOK_RETRY_SCHEDULE_MS: "200,500,1000,2000,3000,5000,8000,13000",
      WEBHOOK_TIMEOUT_MS: "2000",
      WEBHOOK_INTERVAL_MS: "100",
      WEBHOOK_DISABLE_AFTER_SECONDS: "86400",
      LOG_LEVEL: process.env.SERVICE_TEST_LOGS ? "debug" : "warn",
    }),
  );
  const primary = await replicas.add("primary");
  await replicas.start(primary);
  const sql: Database = connectDatabase(database.url, { max: 2 });
  // Registered before the first payment, for every event type.
  const operatorEndpoint = await addOperatorEndpoint(sql, {
    url: receiver.url,
    eventTypes: [],
    description: "fault suite",
  });
  receiver.secrets.push(operatorEndpoint.secret);

  const payers = chain.users.slice(0, 3);
  for (const payer of payers) {
    await callDevnetToken(chain, { functionName: "mint", args: [payer.address, 100_000n * USDC] });
  }

  const faults: FaultCounts = {
    sigkill: 0,
    rpc: rpcFaults.injected,
    postgres_restart: 0,
    reorg_shallow: 0,
    settlements_dropped_by_reorg: 0,
    reorg_deep: 0,
    reorg_deep_remined_lower: 0,
    reorg_dropping_payout: 0,
    payouts_dropped_by_reorg: 0,
    ponder_restart: 0,
    ponder_new_build_schema: 0,
    ponder_died_and_restarted: 0,
    payout_lock_holder_killed: 0,
  };
  const takeoverMs: number[] = [];
  const started = Date.now();
  let stream: PaymentStream | undefined;

  async function restartKilled(replica: Replica) {
    await replicas.start(replica);
  }

  /** SIGKILL a running replica at a random moment, and start it again (as a supervisor does). */
  async function sigkill() {
    await jitter(200, 2_500);
    const running = replicas.running();
    const victim = running[Math.floor(Math.random() * running.length)];
    if (!victim) return;
    await replicas.kill(victim);
    faults.sigkill += 1;
    await jitter(0, 1_000);
    await restartKilled(victim);
  }

  /**
   * Shallower than CONFIRMATIONS, the new branch without the facilitator's transactions: x402
   * settlements (paid out at one block) vanish and must be settled again from the stored
   * authorization. Deeper than CONFIRMATIONS, every transaction is mined again a block later:
   * payments already matched and paid move to other blocks and log indices.
   */
  async function reorg(kind: "shallow" | "deep") {
    await jitter(500, 2_000);
    if (kind === "shallow") {
      // A settlement in the head block: a block mined meanwhile still leaves it in reach.
      await depthOfRecentTransaction(chain, chain.facilitator.address, 1, 30_000);
      const result = await reorganise(chain, CONFIRMATIONS - 1, [chain.facilitator.address]);
      faults.reorg_shallow += 1;
      faults.settlements_dropped_by_reorg += result.dropped.length;
    } else {
      // Deeper than CONFIRMATIONS, every other one mining the old transactions lower than
      // before: below the matcher's cursor, where only a rewind to the split reads them.
      const placement = faults.reorg_deep % 2 === 0 ? "later" : "lower";
      await reorganise(chain, CONFIRMATIONS + 2, [], placement);
      faults.reorg_deep += 1;
      if (placement === "lower") faults.reorg_deep_remined_lower += 1;
    }
  }

  /** A reorg that takes a mined payout away: the payout wallet's transactions are not re-mined. */
  async function reorgDroppingPayout() {
    const depth = await depthOfRecentTransaction(
      chain,
      chain.payout.address,
      PAYOUT_CONFIRMATIONS - 3,
      60_000,
    );
    // One block deeper: a block mined meanwhile still leaves the payout in reach.
    const result = await reorganise(chain, (depth ?? 1) + 1, [chain.payout.address]);
    faults.reorg_dropping_payout += 1;
    faults.payouts_dropped_by_reorg += result.dropped.length;
  }

  async function restartPostgres() {
    await jitter(500, 2_000);
    await database.restart();
    faults.postgres_restart += 1;
  }

  async function restartPonder(newBuild: boolean) {
    await jitter(500, 2_000);
    await indexer.ready();
    if (newBuild) {
      await indexer.newBuild();
      faults.ponder_new_build_schema += 1;
    } else {
      await indexer.restart();
      faults.ponder_restart += 1;
    }
  }

  /**
   * Two replicas on one database: the one holding the payout sender's lock is SIGKILLed; the
   * other must hold it within seconds. The killed one comes back as the standby.
   */
  async function killPayoutLockHolder() {
    const [, existing] = replicas.replicas;
    const second = existing ?? (await replicas.add("second"));
    if (!second.process) await replicas.start(second);
    // A replica that serves has yet to take the lock in its workers, which took over a minute in a
    // whole run on a slow 2-core VM (BENCHMARKS.md#test-suite). The takeover is bounded by the suite.
    const holder = await waitFor(() => payoutLockHolder(sql, replicas.running()), {
      timeoutMs: 150_000,
      what: "a replica holding the payout lock",
    });
    const killedAt = Date.now();
    await replicas.kill(holder);
    faults.payout_lock_holder_killed += 1;
    const successor = await waitFor(
      async () => {
        const now = await payoutLockHolder(sql, replicas.running());
        return now && now !== holder ? now : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 50, what: "the standby to take the payout lock" },
    ).catch(async (error: Error) => {
      throw new Error(`${error.message}: ${await describePayoutLock(sql, replicas.replicas)}`);
    });
    takeoverMs.push(Date.now() - killedAt);
    if (successor === holder) throw new Error("the killed replica cannot hold the lock");
    await restartKilled(holder);
  }

  /** Where `run` stands, and since when: what a run that ran out of time says. */
  let phase = { name: "not started", since: Date.now() };
  /**
   * Set by `stop`: a run that ran out of time goes on in the background, and must not start a
   * fault (restart a replica, Ponder or PostgreSQL) once their stops have begun.
   */
  let stopping = false;
  let running: Promise<void> | undefined;
  const enter = (name: string) => {
    if (stopping) throw new Error(`the fault run was stopped before ${name}`);
    phase = { name, since: Date.now() };
  };

  async function runFaults(): Promise<void> {
    enter("the stream's first payments");
    stream = startPaymentStream({
      chain,
      variant,
      payers,
      pauseMs: 150,
      endpoints: {
        urls: () => replicas.running().map((replica) => replica.url),
        smtpPorts: () => replicas.running().map((replica) => replica.smtpPort),
      },
      mail: { intakeAddress: INTAKE_ADDRESS, catcher },
    });
    const active = stream;
    await waitFor(() => active.sent.length >= 6, {
      timeoutMs: 60_000,
      what: "the first payments of the stream",
    });
    rpcFaults.enable();
    for (let round = 0; round < schedule.rounds; round += 1) {
      const steps: [string, () => Promise<void>][] = [
        ["SIGKILL", sigkill],
        ["shallow reorg", () => reorg("shallow")],
        ["PostgreSQL restart", restartPostgres],
        ["deep reorg", () => reorg("deep")],
        ["reorg dropping a payout", reorgDroppingPayout],
        ["Ponder restart", () => restartPonder(false)],
        ["Ponder restart on a new build", () => restartPonder(true)],
        ["payout lock holder killed", killPayoutLockHolder],
      ];
      for (let kill = 1; kill < schedule.killsPerRound; kill += 1) {
        steps.splice(2 * kill, 0, ["SIGKILL", sigkill]);
      }
      for (const [index, [name, step]] of steps.entries()) {
        enter(`round ${round + 1}, fault ${index + 1} of ${steps.length} (${name})`);
        await step();
      }
    }
    enter("the stream's end");
    await jitter(2_000, 3_000);
    rpcFaults.disable();
    await active.stop();
    enter("the indexer's catching up");
    await indexer.ready();
    enter("the service's settling");
    await waitFor(async () => (await settled(chain, sql)) === undefined, {
      timeoutMs: 180_000,
      intervalMs: 500,
      what: "the service to settle once the faults stopped",
    }).catch(async (error: Error) => {
      // The verdict below says what is wrong; this only says where it stood.
      console.error(`${error.message}: ${await settled(chain, sql)}`);
    });
  }

  return {
    chain,
    sql,
    replicas,
    proxy,
    /** The step `run` is at, and for how many seconds it has been. */
    phase: () => `${phase.name}, for ${Math.round((Date.now() - phase.since) / 1000)} s`,
    /** Runs the stream and the faults in turn, stops them, waits for the service to settle. */
    run(): Promise<void> {
      running = runFaults();
      return running;
    },
    async report(): Promise<FaultReport> {
      const sent = stream?.sent ?? [];
      const verdict = await checkInvariants(chain, sql, {
        describe: (txHash) => {
          const payment = sent.find((candidate) => candidate.txHash?.toLowerCase() === txHash);
          return payment && `${payment.kind}, ${payment.claimId}, ${payment.outcome}`;
        },
        mailCaught: catcher.caught,
        confirmations: CONFIRMATIONS,
      });
      const count = <T>(items: T[], key: (item: T) => string) => {
        const counts: Record<string, number> = {};
        for (const item of items) counts[key(item)] = (counts[key(item)] ?? 0) + 1;
        return counts;
      };
      faults.ponder_died_and_restarted = indexer.diedByItself();
      const report: FaultReport = {
        variant,
        form,
        seconds: Math.round((Date.now() - started) / 1000),
        payments: count(stream?.sent ?? [], (payment) => payment.kind),
        clientOutcomes: count(
          stream?.sent ?? [],
          (payment) => `${payment.kind}: ${payment.outcome}`,
        ),
        clientErrors: (stream?.errors ?? []).slice(0, 10),
        faults,
        takeoverMs,
        verdict,
        webhooks: await countWebhookDeliveries(sql, receiver.received),
      };
      const file = join(tmpdir(), `pay-and-earn-faults-${variant}-${form}.json`);
      await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
      return report;
    },
    serviceOutput: () => replicas.output(),
    /** Every service process's whole output, a file each under the system's temp folder. */
    async saveServiceOutput(): Promise<string> {
      const directory = join(tmpdir(), `pay-and-earn-faults-${variant}-${form}-${Date.now()}`);
      await replicas.saveOutput(directory);
      return directory;
    },
    async stop(): Promise<void> {
      stopping = true;
      // The fault in progress ends first (its own waits bound it), within the hook's time.
      await Promise.race([
        running?.catch(() => {}),
        new Promise((resolve) => setTimeout(resolve, 60_000).unref()),
      ]);
      await stream?.stop().catch(() => {});
      await replicas.stopAll();
      await indexer.stop().catch(() => {});
      await sql.end({ timeout: 1 }).catch(() => {});
      await proxy.stop();
      await catcher.stop();
      await receiver.stop();
      await chain.stop();
      await (database as RestartablePostgres).stop();
    },
  };
}

export type FaultRun = Awaited<ReturnType<typeof startFaultRun>>;
export type { TestChain };
