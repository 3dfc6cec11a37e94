import type { PaymentRequired } from "@x402/core/types";
import {
  deleteTaskRecord,
  listTaskRecords,
  pruneTaskRecords,
  readTaskRecord,
  reserveWaitingTaskRecord,
  saveTaskRecord,
  type TaskRecord,
} from "../agentTasks/taskRecords.ts";
import { publicChainReads } from "../chain/publicChainReads.ts";
import { attachTx } from "../claims/attachTx.ts";
import { claimLinks } from "../claims/claimView.ts";
import { type CreateClaimResult, createClaim } from "../claims/createClaim.ts";
import { gatherClaimCreations } from "../claims/openClaims.ts";
import { gatherClaimReads, getClaim, getClaimWithReceipt } from "../claims/readClaim.ts";
import { createCompletionSignal } from "../claims/waitForClaim.ts";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import { claimEventStreams, type OpenClaimEventStreamResult } from "../events/claimEventStream.ts";
import { createEventStreams } from "../events/eventStreams.ts";
import { createLedgerFeed, type OpenLedgerStreamResult } from "../events/ledgerStream.ts";
import { streamSlots } from "../events/streamSlots.ts";
import { checkHealth, serviceHealthDependencies } from "../health/checkHealth.ts";
import { cachedFirstPages } from "../ledger/cachedFirstPages.ts";
import { cachedLedgerStats } from "../ledger/cachedLedgerStats.ts";
import { listLedger } from "../ledger/listLedger.ts";
import type { readLedgerDaily, readLedgerTotals } from "../ledger/readLedgerStats.ts";
import { type Delivery, deliverNextMail } from "../mailbox/deliverNextMail.ts";
import {
  type InboundToStore,
  inboundHead,
  leaseNextInbound,
  type MailTransport,
  originOfClaim,
  pruneInboundMessages,
  recordInboundFailure,
  type StoredInbound,
  storeInboundMessage,
} from "../mailbox/inboundMessages.ts";
import { recordIntakeAlive, recordIntakeError } from "../mailbox/mailStatus.ts";
import { nextMailDueInMs, type QueuedMail, sentMessageIdsOfClaim } from "../mailbox/outbox.ts";
import { handleMailRequest } from "../mailRequests/handleMailRequest.ts";
import type { MailRequest } from "../mailRequests/mailRequest.ts";
import { buildOffer, type Offer } from "../offer/buildOffer.ts";
import { explainPayment } from "../payments/explainPayment.ts";
import { sharedFor } from "../readCache.ts";
import { type InvalidRequest, invalidField, invalidRequest } from "../reasons/refusal.ts";
import { getReceipt } from "../receipts/getReceipt.ts";
import { type ReceiptVerdict, verifyReceipt } from "../receipts/verifyReceipt.ts";
import { agentNameInput, verifyReceiptRequest, webhookUrlInput } from "../schemas/inputs.ts";
import { parseInput } from "../schemas/parseInput.ts";
import type { ServiceDeps } from "../serviceDeps.ts";
import { refusedWebhookUrl } from "../webhooks/publicAddress.ts";
import {
  type A2aPushConfig,
  catchUpA2aPushConfigs,
  deleteA2aPushConfig,
  listA2aPushConfigs,
  pruneA2aPushConfigs,
  registerClaimWebhook,
  saveA2aPushConfig,
} from "../webhooks/webhookEndpoints.ts";
import { earnWithX402 } from "../x402/earnWithX402.ts";
import type { X402Runtime } from "../x402/x402Runtime.ts";

export type VerifyReceiptResult = { type: "verdict"; verdict: ReceiptVerdict } | InvalidRequest;

/**
 * The service's use-cases, bound to its dependencies once by the composition root
 * (api/service.ts) and handed to every surface: REST, GraphQL, MCP, A2A, mail, pages. Each
 * takes what a client sent as it came (ids as text, bodies unparsed), checks it, and returns a
 * tagged result with the whole answer; a surface only switches on `type` and writes the result
 * in its protocol, with the views beside each concept and the reasons of api/reasons.
 */
export interface Core {
  config: ServiceConfig;
  /** The offer document (SPEC.md), built once. */
  offer: Offer;
  /**
   * A new claim (see claims/createClaim.ts); with `webhook_url`, its events are posted there
   * signed with `webhookSecret`, given here once (docs/events.md#a-claims-webhook_url).
   */
  createClaim(
    ...args: Parameters<OmitFirst<typeof createClaim>>
  ): Promise<CreateClaimResult & { webhookSecret?: string }>;
  /** The claim and whether its status is final (api/schemas/claimStatus.ts). */
  getClaim(claimId: string): ReturnType<typeof getClaim>;
  /** The same, with the receipt once the claim is completed: a page, a task, a mail. */
  getClaimWithReceipt(claimId: string): ReturnType<typeof getClaimWithReceipt>;
  attachTx: OmitFirst<typeof attachTx>;
  getReceipt(claimId: string): ReturnType<typeof getReceipt>;
  verifyReceipt(request: unknown): Promise<VerifyReceiptResult>;
  explainPayment: OmitFirst<typeof explainPayment>;
  /**
   * x402 on any transport: the body as sent and the payment (PAYMENT-SIGNATURE) if any. With
   * `webhook_url`, the claim's events are posted there, signed with `webhookSecret`, given once
   * with the answer that created the claim (docs/events.md#a-claims-webhook_url).
   */
  earnWithX402(
    body: unknown,
    payment: string | undefined,
  ): Promise<Awaited<ReturnType<typeof earnWithX402>> & { webhookSecret?: string }>;
  /** An x402 402 answer as the MCP tool gives it (the tool as resource; Bazaar for MCP). */
  paymentRequiredForMcp(paymentRequired: PaymentRequired): Promise<PaymentRequired>;
  /** The unfiltered first page is shared like the aggregates (api/ledger/cachedFirstPages.ts). */
  listLedger(query: unknown): ReturnType<typeof listLedger>;
  /** Aggregates over every completed claim: shared for READ_CACHE_MS, fresh after a completion. */
  ledgerTotals(): ReturnType<typeof readLedgerTotals>;
  ledgerDaily(days: number): ReturnType<typeof readLedgerDaily>;
  /**
   * Claims have completed (in any process: the composition root listens for the NOTIFY): the
   * next ledger totals, stats and first pages are read anew.
   */
  claimsCompleted(): void;
  /**
   * Counts `claimsCompleted` calls: an answer made of the ledger alone, kept by a surface, is
   * current while this is unchanged (and no older than READ_CACHE_MS, like the ledger's reads).
   */
  ledgerVersion(): number;
  /**
   * A claim's events, live, for `client` (the SSE route, GraphQL subscriptions): resumed after
   * `lastEventId`, at most EVENT_STREAMS_PER_CLIENT at once (docs/events.md#live-streams).
   */
  openClaimEventStream(
    claimId: string,
    lastEventId: string | undefined,
    client: string,
  ): Promise<OpenClaimEventStreamResult>;
  /**
   * The ledger's new entries, live, for `client` (the GraphQL subscription `ledgerEntryAdded`):
   * all, or one agent's; counted with the claim streams against EVENT_STREAMS_PER_CLIENT.
   */
  openLedgerStream(
    client: string,
    agentName: string | undefined,
  ): Promise<OpenLedgerStreamResult | InvalidRequest>;
  /** Ends the streams' LISTEN connection (the service stopping). */
  stopEventStreams(): Promise<void>;
  /** Shared for READ_CACHE_MS by every caller (GET /api/health, GET /metrics, agents). */
  checkHealth(): ReturnType<typeof checkHealth>;
  /**
   * The mail flow: the stored inbound messages and the outbox, and what the service does with
   * a mail (`handleRequest`). The mail surface reads and writes mail; it decides nothing.
   */
  mail: {
    /** Stores a message as an intake took it; false for one stored already (a redelivery). */
    storeInbound(message: InboundToStore): Promise<boolean>;
    intakeAlive(transport: MailTransport): Promise<void>;
    intakeError(transport: MailTransport, error: string): Promise<void>;
    /** The oldest message waiting, for `leaseSeconds` this processor's alone. */
    leaseNextInbound(leaseSeconds: number): Promise<StoredInbound | null>;
    /**
     * A failed attempt at a message: tried again after a backoff, given up as `giveUpAs`
     * after a few; true when it was given up.
     */
    failInbound(
      messageId: string,
      error: string,
      giveUpAs?: "processing_failed" | "auth_timeout",
    ): Promise<boolean>;
    /** Decides on a message and records the verdict and its answer (handleMailRequest.ts). */
    handleRequest(request: MailRequest): Promise<void>;
    /** Deletes messages past MAIL_RETENTION_DAYS, a batch at a time; how many. */
    pruneInbound(): Promise<number>;
    /** To answer in a message's thread: its subject and header block. */
    inboundHead(messageId: string): ReturnType<typeof inboundHead>;
    /** The message that created a mail claim: where its receipt is threaded. */
    originOfClaim(claimId: string): ReturnType<typeof originOfClaim>;
    /** The Message-IDs of the mails sent about a claim, oldest first. */
    sentMessageIdsOfClaim(claimId: string): Promise<string[]>;
    /** Hands the next due mail to `deliver`, records the outcome; false when none is due. */
    deliverNext(deliver: (mail: QueuedMail) => Promise<Delivery>): Promise<boolean>;
    nextDueInMs(): Promise<number | null>;
  };
  /** The A2A surface's stored tasks (the protocol's records; the money is in their claims). */
  agentTasks: {
    /**
     * Saves a task for `client`; at most once a minute, deletes tasks past their lifetime and
     * the push configs of tasks that are gone.
     */
    save(record: Omit<TaskRecord, "updatedAt">, client: string | null): Promise<void>;
    /** Forgets a task and its push configs. */
    delete(id: string): Promise<void>;
    read(id: string): Promise<TaskRecord | null>;
    list(query: Parameters<typeof listTaskRecords>[1]): Promise<TaskRecord[]>;
    /**
     * Stores a new task waiting for its payment unless `client` holds `limit` such tasks
     * already; false when it is at the cap. Atomic per client (parallel calls cannot pass it).
     */
    reserveWaiting(
      record: Omit<TaskRecord, "updatedAt">,
      client: string,
      limit: number,
    ): Promise<boolean>;
    /**
     * A task's push notification configs (`tasks/pushNotificationConfig/*`): the claim's events
     * sent through the webhook outbox, signed, to public addresses only
     * (docs/events.md#a2a-push-notifications). `save` answers why a config is refused.
     */
    pushConfigs: {
      save(config: A2aPushConfig): Promise<{ type: "saved" } | { type: "refused"; why: string }>;
      list(taskId: string): Promise<A2aPushConfig[]>;
      delete(taskId: string, configId: string): Promise<void>;
    };
  };
}

/** What a header may carry: visible ASCII and spaces, no line breaks, within reason. */
const HEADER_VALUE = /^[\x20-\x7e]{0,1024}$/;

/**
 * Why an A2A push config is refused, or null: its URL gets the checks of a claim's
 * `webhook_url` (schemas/inputs.ts), its token and authentication go back as headers; none is
 * accepted when WEBHOOKS_PER_CLAIM is 0.
 */
function refusedPushConfig(
  pushConfig: A2aPushConfig,
  webhooks: ServiceConfig["webhooks"],
): string | null {
  if (webhooks.perClaim === 0) return "is not accepted by this service (WEBHOOKS_PER_CLAIM is 0)";
  const checked = webhookUrlInput.safeParse(pushConfig.url);
  if (!checked.success) return `url ${checked.error.issues[0]?.message ?? "is not accepted"}`;
  const refused = refusedWebhookUrl(new URL(pushConfig.url), webhooks.allowLoopback);
  if (refused) return `url ${refused}`;
  const { token, authentication } = pushConfig;
  for (const [name, value] of [
    ["token", token],
    ["authentication.scheme", authentication?.scheme ?? ""],
    ["authentication.credentials", authentication?.credentials ?? ""],
  ]) {
    if (!HEADER_VALUE.test(value as string)) {
      return `${name} must be at most 1024 printable ASCII characters`;
    }
  }
  if (authentication && !/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(authentication.scheme)) {
    return "authentication.scheme must be an HTTP authentication scheme (Bearer, Basic, …)";
  }
  return null;
}

/** The `webhook_url` a creation request names, if it names one (checked with the rest). */
function webhookUrlOf(request: unknown): string | undefined {
  if (typeof request !== "object" || request === null || !("webhook_url" in request)) {
    return undefined;
  }
  const url = (request as { webhook_url: unknown }).webhook_url;
  return typeof url === "string" ? url : undefined;
}

type OmitFirst<F> = F extends (first: never, ...rest: infer Rest) => infer Result
  ? (...args: Rest) => Result
  : never;

/** Attempts at a stored message before it is given up (never answered). */
const MAIL_MAX_ATTEMPTS = 5;

/** How often a saving process deletes the A2A tasks past their lifetime. */
const TASK_PRUNE_INTERVAL_MS = 60_000;

export function createCore(deps: ServiceDeps, x402: X402Runtime | null): Core {
  const { sql, config } = deps;
  const offer = buildOffer(config);
  const statusUrl = (claimId: string) => claimLinks(config, claimId).status_url;
  // The expensive public reads, cached here so that every surface gets the cache.
  const ledgerStats = cachedLedgerStats(sql, config.readCacheMs);
  const ledgerFirstPages = cachedFirstPages(sql, config.readCacheMs);
  const health = sharedFor(config.readCacheMs, () =>
    checkHealth(serviceHealthDependencies(deps, x402?.settleAndPay)),
  );
  let ledgerVersion = 0;
  const taskTtl = config.agents.taskLifetimes;
  // The RPC-backed public reads share their answers and a few RPC calls at once, so that a
  // flood of them cannot spend the quota the payouts need.
  const reads = publicChainReads(deps.chain, {
    cacheMs: config.readCacheMs,
    maxConcurrent: config.publicChainReads.maxConcurrent,
  });
  let lastTaskPrune = 0;
  const completions = createCompletionSignal();
  const readClaims = gatherClaimReads(sql);
  const openClaim = gatherClaimCreations(sql, config, deps.logger, readClaims);
  const mailSenderLog = deps.logger.child({ worker: "mail_sender" });
  // A poll every few seconds only in case a notification was lost with its connection.
  const eventStreams = createEventStreams(sql, deps.logger, { pollMs: 5_000 });
  const slots = streamSlots(config.webhooks.streams.perClient);
  const openClaimEventStream = claimEventStreams({
    config,
    readClaim: readClaims,
    streams: eventStreams,
    slots,
  });
  const ledgerFeed = createLedgerFeed(sql, deps.logger, {
    pollMs: 5_000,
    maxMs: config.webhooks.streams.maxMs,
    perClient: config.webhooks.streams.perClient,
    slots,
  });
  /** Why a claim's webhook_url is refused before the claim is created, or null. */
  const refusedClaimWebhook = (webhookUrl: string): string | null =>
    config.webhooks.perClaim === 0
      ? "is not accepted by this service (WEBHOOKS_PER_CLAIM is 0)"
      : URL.canParse(webhookUrl)
        ? refusedWebhookUrl(new URL(webhookUrl), config.webhooks.allowLoopback)
        : null;
  const core: Core = {
    config,
    offer,
    async createClaim(request, options) {
      const webhookUrl = webhookUrlOf(request);
      const refusal = webhookUrl === undefined ? null : refusedClaimWebhook(webhookUrl);
      if (refusal) return invalidField("webhook_url", refusal);
      const result = await createClaim({ ...deps, openClaim }, request, options);
      if (result.type !== "created" || webhookUrl === undefined) return result;
      // Never on a claim given back: createClaim opens a new one when a webhook_url is named.
      if (result.reused) {
        throw new Error(`claim ${result.claim.id} was given back to a webhook_url`);
      }
      const registered = await registerClaimWebhook(sql, {
        claimId: result.claim.id,
        url: new URL(webhookUrl).href,
        limit: config.webhooks.perClaim,
      });
      if (registered.type === "too_many") {
        return invalidField(
          "webhook_url",
          `this claim has ${config.webhooks.perClaim} webhooks already (WEBHOOKS_PER_CLAIM)`,
        );
      }
      return { ...result, webhookSecret: registered.secret };
    },
    getClaim: (claimId) => getClaim(readClaims, claimId),
    getClaimWithReceipt: (claimId) => getClaimWithReceipt({ read: readClaims, sql }, claimId),
    attachTx: (claimId, request) => attachTx(deps, claimId, request),
    getReceipt: (claimId) => getReceipt({ sql, statusUrl }, claimId),
    async verifyReceipt(request) {
      const input = parseInput(verifyReceiptRequest, request);
      if (!input.ok) return invalidRequest(input.errors);
      return {
        type: "verdict",
        verdict: await verifyReceipt({ sql, reads }, config.receipts.signer, input.value),
      };
    },
    explainPayment: (txHash) => explainPayment({ sql, config, reads }, txHash),
    async earnWithX402(body, payment) {
      // Refused before anything is verified or settled: a payment is never taken for a claim
      // whose webhook would be refused.
      const webhookUrl = webhookUrlOf(body);
      const refusal = webhookUrl === undefined ? null : refusedClaimWebhook(webhookUrl);
      if (refusal) return invalidField("webhook_url", refusal);
      const result = await earnWithX402({ ...deps, x402, completions }, body, payment);
      if ((result.type !== "paid" && result.type !== "settlement_unknown") || !webhookUrl) {
        return result;
      }
      // One webhook per x402 claim, registered by the answer that created it: a replay of the
      // same payment (its answer again) registers none and gives no secret.
      const registered = await registerClaimWebhook(sql, {
        claimId: result.claim.id,
        url: new URL(webhookUrl).href,
        limit: 1,
      });
      return registered.type === "registered"
        ? { ...result, webhookSecret: registered.secret }
        : result;
    },
    async paymentRequiredForMcp(paymentRequired) {
      return x402 ? (await x402.terms()).forMcpTool(paymentRequired) : paymentRequired;
    },
    listLedger: (query) => listLedger(sql, query, ledgerFirstPages),
    ledgerTotals: () => ledgerStats.totals(),
    ledgerDaily: (days) => ledgerStats.daily(days),
    claimsCompleted: () => {
      ledgerVersion += 1;
      completions.notify();
      ledgerStats.forget();
      ledgerFirstPages.forget();
    },
    ledgerVersion: () => ledgerVersion,
    checkHealth: () => health(),
    openClaimEventStream,
    openLedgerStream(client, agentName) {
      if (agentName === undefined) return ledgerFeed.open(client, undefined);
      const checked = agentNameInput.safeParse(agentName);
      if (!checked.success) {
        return Promise.resolve(
          invalidField("agent_name", checked.error.issues[0]?.message ?? "is not valid"),
        );
      }
      return ledgerFeed.open(client, checked.data);
    },
    async stopEventStreams() {
      await Promise.all([eventStreams.stop(), ledgerFeed.stop()]);
    },
    agentTasks: {
      async save(record, client) {
        await saveTaskRecord(sql, record, client);
        if (record.claimId !== null) await catchUpA2aPushConfigs(sql, record.id);
        if (Date.now() - lastTaskPrune > TASK_PRUNE_INTERVAL_MS) {
          lastTaskPrune = Date.now();
          await pruneTaskRecords(sql, taskTtl);
          await pruneA2aPushConfigs(sql);
        }
      },
      async delete(id) {
        await deleteTaskRecord(sql, id);
        await deleteA2aPushConfig(sql, id);
      },
      read: (id) => readTaskRecord(sql, id, taskTtl),
      list: (query) => listTaskRecords(sql, query, taskTtl),
      reserveWaiting: (record, client, limit) =>
        reserveWaitingTaskRecord(sql, record, client, limit, taskTtl),
      pushConfigs: {
        async save(pushConfig) {
          const why = refusedPushConfig(pushConfig, config.webhooks);
          if (why) return { type: "refused", why };
          // Stored as the URL parser reads it: it drops line breaks and tabs a typed URL may
          // carry, which a list of failures would otherwise print as lines of their own.
          const saved = await saveA2aPushConfig(
            sql,
            { ...pushConfig, url: new URL(pushConfig.url).href },
            config.webhooks.perClaim,
          );
          return saved.type === "saved"
            ? saved
            : {
                type: "refused",
                why: `this task has ${config.webhooks.perClaim} push notification configs already (WEBHOOKS_PER_CLAIM)`,
              };
        },
        list: (taskId) => listA2aPushConfigs(sql, taskId),
        delete: (taskId, configId) => deleteA2aPushConfig(sql, taskId, configId),
      },
    },
    mail: {
      storeInbound: (message) => storeInboundMessage(sql, message),
      intakeAlive: (transport) => recordIntakeAlive(sql, transport),
      intakeError: (transport, error) => recordIntakeError(sql, transport, error),
      leaseNextInbound: (leaseSeconds) => leaseNextInbound(sql, leaseSeconds),
      failInbound: (messageId, error, giveUpAs) =>
        recordInboundFailure(sql, messageId, error, MAIL_MAX_ATTEMPTS, giveUpAs),
      handleRequest: (request) =>
        handleMailRequest(
          {
            sql,
            config,
            logger: deps.logger,
            claims: {
              create: (claimRequest, options) => core.createClaim(claimRequest, options),
              attachTx: (claimId, attachRequest) => core.attachTx(claimId, attachRequest),
              get: (claimId) => core.getClaim(claimId),
            },
          },
          request,
        ),
      pruneInbound: () => pruneInboundMessages(sql, config.mail.retentionDays),
      inboundHead: (messageId) => inboundHead(sql, messageId),
      originOfClaim: (claimId) => originOfClaim(sql, claimId),
      sentMessageIdsOfClaim: (claimId) => sentMessageIdsOfClaim(sql, claimId),
      deliverNext: (deliver) =>
        deliverNextMail({ sql, mail: config.mail, logger: mailSenderLog }, deliver),
      nextDueInMs: () => nextMailDueInMs(sql),
    },
  };
  return core;
}
