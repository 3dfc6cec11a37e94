import type { AttachResult } from "../claims/attachTx.ts";
import type { CreateClaimOptions, CreateClaimResult } from "../claims/createClaim.ts";
import type { GetClaimResult } from "../claims/readClaim.ts";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import { crashIfConfigured } from "../crashHook.ts";
import type { Database, Transaction } from "../db/connect.ts";
import type { Logger } from "../logger.ts";
import {
  claimMailAddress,
  delayInbound,
  findUnrecordedMailClaim,
  finishInbound,
  type InboundVerdict,
  lockInbound,
} from "../mailbox/inboundMessages.ts";
import { isOwnMessageId, queueMail } from "../mailbox/outbox.ts";
import type { MailReason } from "../reasons/reasonCatalog.ts";
import { describeRefusal, type Refusal } from "../reasons/refusal.ts";
import { askedBeyond, type MailRequest } from "./mailRequest.ts";
import { spentReplyBudget } from "./replyBudget.ts";
import type { ReplyPayload } from "./replyPayload.ts";

/**
 * What the service does with a mail (the mail processor's decision, api/mail/processInbound.ts
 * reads the mail and brings it here): a verdict (processed, ignored, rejected) and at most one
 * answer, both written in one transaction with the message row locked, or a wait when a reply
 * budget is spent. Only a claim's own address speaks in its thread; a claim is created through
 * the same use-case as POST /api/claims, a tx hash attached through the same as
 * POST /api/claims/{id}/tx; a claim created by a processing that died before recording it is
 * taken up again, never created twice.
 */
export interface MailRequestDeps {
  sql: Database;
  config: ServiceConfig;
  logger: Logger;
  /** The core's claim use-cases, as every surface calls them. */
  claims: {
    create(request: unknown, options: CreateClaimOptions): Promise<CreateClaimResult>;
    attachTx(claimId: string, request: unknown): Promise<AttachResult>;
    get(claimId: string): Promise<GetClaimResult>;
  };
}

type Answer =
  | { kind: "mail_instructions"; claimId: string }
  | { kind: "mail_reply"; claimId: string | null; payload: ReplyPayload };

type Decision =
  | { verdict: InboundVerdict; answer: Answer | null; delay?: undefined }
  /** A reply budget is spent: the message waits (not answered yet, not dropped). */
  | { delay: { seconds: number; why: string } };

type Verdict = Omit<InboundVerdict, "status" | "outcome">;

export async function handleMailRequest(
  deps: MailRequestDeps,
  request: MailRequest,
): Promise<void> {
  await deps.sql.begin(async (transaction) => {
    if (!(await lockInbound(transaction, request.messageId))) return;
    const decision = await decide(deps, transaction, request);
    if (decision.delay) {
      await delayInbound(transaction, request.messageId, decision.delay);
      deps.logger.info(
        { message_id: request.messageId, ...decision.delay },
        "reply budget spent; the message waits",
      );
      return;
    }
    await finishInbound(transaction, request.messageId, decision.verdict, request.headerBlock);
    await queueAnswer(transaction, request, decision);
    deps.logger.info(
      {
        message_id: request.messageId,
        status: decision.verdict.status,
        outcome: decision.verdict.outcome,
        claim_id: decision.verdict.claimId,
      },
      "mail acted on",
    );
  });
}

/** The addresses of the service itself: never a payout address, never read from a mail. */
export function serviceAddresses(config: ServiceConfig): string[] {
  const { chain, payout, receipts } = config;
  return [chain.payTo, chain.usdcAddress, payout.address, receipts.signer];
}

async function queueAnswer(
  transaction: Transaction,
  request: MailRequest,
  decision: { verdict: InboundVerdict; answer: Answer | null },
) {
  const { answer, verdict } = decision;
  if (!answer || !verdict.fromAddress) return;
  await queueMail(transaction, {
    kind: answer.kind,
    claimId: answer.claimId,
    recipient: verdict.fromAddress,
    inReplyTo: request.messageId,
    payload: answer.kind === "mail_reply" ? answer.payload : {},
    idempotencyKey:
      answer.kind === "mail_instructions"
        ? `mail_instructions:${answer.claimId}`
        : `mail_reply:${request.messageId}`,
  });
}

async function decide(
  deps: MailRequestDeps,
  transaction: Transaction,
  request: MailRequest,
): Promise<Decision> {
  const { mail: settings } = deps.config;
  const base: Verdict = { fromAddress: request.from, subject: request.subject, claimId: null };
  const unanswered = (status: "ignored" | "rejected", reason: MailReason): Decision => ({
    verdict: { ...base, status, outcome: reason },
    answer: null,
  });
  const help = (reason: MailReason, found?: string[]): Decision => ({
    verdict: { ...base, status: "processed", outcome: reason },
    answer: { kind: "mail_reply", claimId: null, payload: { type: "help", reason, found } },
  });

  if (request.notAnswered) {
    return unanswered(request.notAnswered.status, request.notAnswered.reason);
  }
  if (request.ownMessage || (await isOwnMessageId(transaction, request.messageId))) {
    return unanswered("ignored", "own_message");
  }
  if (!request.from) return unanswered("rejected", "no_sender");
  const from = request.from;
  if (request.unauthenticated) return unanswered("rejected", request.unauthenticated);

  // No answer later than MAIL_REPLY_MAX_DELAY_HOURS after the message came, whatever held it
  // (a budget, a backlog, a service that was down): the sender has given up or written again.
  const waited = Date.now() - request.receivedAt.getTime();
  if (waited > settings.replyMaxDelayMs) return unanswered("rejected", "too_late");
  const spent = await spentReplyBudget(transaction, settings, from);
  if (spent) {
    if (waited + spent.seconds * 1000 > settings.replyMaxDelayMs) {
      return unanswered("rejected", "rate_limited");
    }
    return { delay: spent };
  }
  if (request.truncated) return help("too_large");
  if (request.unreadable) return help("unreadable");

  if (request.threadClaimId) {
    const owner = await claimMailAddress(transaction, request.threadClaimId);
    // Only the claim's own address speaks in its thread; anyone else starts afresh.
    if (owner && owner.toLowerCase() === from.toLowerCase()) {
      return answerInThread(deps, request, request.threadClaimId, base);
    }
  }
  return newClaim(deps, transaction, request, from, base, help);
}

/** A reply in a claim's thread: a tx hash is attached to that claim; else its status. */
async function answerInThread(
  deps: MailRequestDeps,
  request: MailRequest,
  claimId: string,
  base: Verdict,
): Promise<Decision> {
  const found = await deps.claims.get(claimId);
  if (found.type !== "claim") throw new Error(`the claim ${claimId} of a thread vanished`);
  const claim = found.claim;
  const known = [claim.txHash, claim.payment?.txHash, claim.payoutTx].filter(
    (hash): hash is string => hash !== null && hash !== undefined,
  );
  const asks = askedBeyond(request.asks, {
    addresses: [...serviceAddresses(deps.config), claim.payoutAddress],
    txHashes: known,
  });
  const reply = (outcome: string, payload: ReplyPayload): Decision => ({
    verdict: { ...base, claimId, status: "processed", outcome },
    answer: { kind: "mail_reply", claimId, payload },
  });
  if (asks.txHashes.length > 1) {
    return reply("two_tx_hashes", { type: "help", reason: "two_tx_hashes", found: asks.txHashes });
  }
  const [txHash] = asks.txHashes;
  if (!txHash) {
    return reply("status_sent", {
      type: "status",
      ...(asks.addresses.length > 0 ? { note: "payout_address_fixed" as const } : {}),
    });
  }
  const result = await deps.claims.attachTx(claimId, { tx_hash: txHash });
  if (result.type === "attached") {
    return reply("tx_attached", { type: "attached", state: result.state, txHash: result.txHash });
  }
  return reply("tx_refused", refusalPayload(result));
}

/** A first message: one payout address (and maybe a tx hash) makes one claim, flow `mail`. */
async function newClaim(
  deps: MailRequestDeps,
  transaction: Transaction,
  request: MailRequest,
  from: string,
  base: Verdict,
  help: (reason: MailReason, found?: string[]) => Decision,
): Promise<Decision> {
  const asks = askedBeyond(request.asks, { addresses: serviceAddresses(deps.config) });
  if (asks.addresses.length === 0) return help("no_address");
  if (asks.addresses.length > 1) return help("two_addresses", asks.addresses);
  if (asks.txHashes.length > 1) return help("two_tx_hashes", asks.txHashes);
  const [payoutAddress] = asks.addresses as [string];
  const [txHash] = asks.txHashes;

  const created = (claimId: string): Decision => ({
    verdict: { ...base, claimId, status: "processed", outcome: "claim_created" },
    answer: { kind: "mail_instructions", claimId },
  });
  // A crash between creating the claim and recording it left the claim behind: take it.
  const unrecorded = await findUnrecordedMailClaim(transaction, {
    email: from,
    payoutAddress,
    since: request.receivedAt,
  });
  if (unrecorded) return created(unrecorded);

  const result = await deps.claims.create(
    {
      payout_address: payoutAddress,
      email: from,
      ...(txHash ? { tx_hash: txHash } : {}),
      ...(asks.agentName !== null ? { agent_name: asks.agentName } : {}),
    },
    { flow: "mail", client: `mail:${from.toLowerCase()}` },
  );
  if (result.type === "created") {
    crashIfConfigured(deps.config, "after_mail_claim_created");
    return created(result.claim.id);
  }
  return {
    verdict: { ...base, status: "processed", outcome: "claim_refused" },
    answer: { kind: "mail_reply", claimId: null, payload: refusalPayload(result) },
  };
}

function refusalPayload(refusal: Refusal): ReplyPayload {
  const { code, title, detail, fields } = describeRefusal(refusal);
  return { type: "refusal", refusal: { code, title, detail, fields } };
}
