import { createHash } from "node:crypto";
import {
  type InvalidRequest,
  invalidField,
  invalidRequest,
  type Refusal,
} from "../reasons/refusal.ts";
import { createClaimRequest } from "../schemas/inputs.ts";
import { parseInput } from "../schemas/parseInput.ts";
import type { ServiceDeps } from "../serviceDeps.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import { type AttachRefusal, attachTxInTransaction } from "./attachTx.ts";
import { insertClaim, type NewClaim } from "./insertClaim.ts";
import type { ClaimOpener } from "./openClaims.ts";
import { refusedPayoutAddress } from "./payoutAddressRule.ts";
import { type ClaimDetails, readClaim } from "./readClaim.ts";
import { readTransferEvidence } from "./transferEvidence.ts";

export type CreateClaimResult =
  /** `reused`: the payout address's open claim, given back instead of a new one. */
  | { type: "created"; claim: ClaimDetails; reused: boolean }
  | InvalidRequest
  | Extract<Refusal, { type: "too_many_open_claims" }>
  | Exclude<AttachRefusal, { type: "claim_not_found" }>;

export interface CreateClaimOptions {
  flow?: "claim" | "mail";
  /**
   * Who asks, as the surface knows them (`ip:<IPv4 or IPv6 /48>`, `mail:<sender>`): counted
   * against OPEN_CLAIMS_PER_CLIENT. Stored only as a digest.
   */
  client?: string;
  /**
   * False: always a claim of its own, never the open one asked for again. An A2A task follows
   * the claim it names, and its push configs receive that claim's events: a task must not name
   * a claim someone else asked for (docs/events.md#a2a-push-notifications).
   */
  reuseOpenClaim?: boolean;
}

/**
 * An open claim is given back to whoever asks again for it (same payout address, flow, email
 * and agent name, no tx hash) while at least this much of its life is left; closer to its end
 * a new claim is better than one that expires while being paid.
 */
const REUSE_MIN_LIFE_LEFT_SECONDS = 3600;

/** Carries a refusal out of the transaction so that nothing of the claim is kept. */
class Refused extends Error {
  readonly result: CreateClaimResult;
  constructor(result: CreateClaimResult) {
    super(result.type);
    this.result = result;
  }
}

/**
 * A new claim, awaiting payment (POST /api/claims, a mail, an agent's tool call): the request
 * as the client sent it (`createClaimRequest`), checked here, and the claim as created. A tx
 * hash given at creation is attached under the same rules as later; any refusal creates no
 * claim at all.
 *
 * Asking again for the same claim-flow claim (same payout address, email and agent name, no tx
 * hash, no webhook_url) gives the open one back (`reused`), so retries and impatient clients hold one claim,
 * and one unique amount, not many. A client holds at most OPEN_CLAIMS_PER_CLIENT open unpaid
 * claims (`too_many_open_claims`). No claim is ever refused for want of a unique amount: it
 * opens without one (see insertClaim).
 */
export async function createClaim(
  deps: ServiceDeps & { openClaim: ClaimOpener },
  request: unknown,
  options: CreateClaimOptions = {},
): Promise<CreateClaimResult> {
  const flow = options.flow ?? "claim";
  const input = parseInput(createClaimRequest, request);
  if (!input.ok) return invalidRequest(input.errors);
  const {
    payout_address: payoutAddress,
    tx_hash: txHash,
    email,
    agent_name,
    webhook_url: webhookUrl,
  } = input.value;
  const refusal = refusedPayoutAddress(deps.config, payoutAddress);
  if (refusal) return invalidField("payout_address", refusal);
  const clientKey = options.client === undefined ? undefined : clientDigest(options.client);

  const newClaim: NewClaim = {
    flow,
    payoutAddress,
    email,
    agentName: agent_name,
    clientKey,
    // A creation that names a webhook_url opens a claim of its own: given back to another
    // request, a claim would send its events to whoever asked for it again, and a stranger
    // could spend its WEBHOOKS_PER_CLAIM (docs/events.md#a-claims-webhook_url).
    reuseMinLifeSeconds:
      flow === "claim" && !txHash && webhookUrl === undefined && options.reuseOpenClaim !== false
        ? REUSE_MIN_LIFE_LEFT_SECONDS
        : undefined,
  };

  if (!txHash) {
    // One statement, its own transaction (shared with the creations asked for in the same turn,
    // openClaims.ts): the locks, the reuse, the cap, the claim, its amount.
    const result = await deps.openClaim(newClaim);
    if (result.type === "too_many_open_claims") return result;
    return { type: "created", claim: result.claim, reused: result.type === "reused" };
  }

  // The chain is read before the transaction: nothing slow runs under the matching lock.
  const evidence = await readTransferEvidence(deps, txHash);
  let claimId: string;
  try {
    claimId = await deps.sql.begin(async (transaction) => {
      // Lock order: the matching lock first, then the payout address's and the client's (taken
      // by insertClaim), so two requests never wait for each other in a circle.
      await transaction`select pg_advisory_xact_lock(${LOCK_KEYS.matching})`;
      const inserted = await insertClaim(transaction, deps.config, newClaim);
      if (inserted.type === "too_many_open_claims") throw new Refused(inserted);
      const { claim } = inserted;
      if (evidence) {
        const outcome = await attachTxInTransaction(
          transaction,
          deps,
          {
            id: claim.id,
            flow,
            status: "awaiting_payment",
            payout_address: claim.payoutAddress,
            amount_due: String(claim.amountDue),
            tx_hash: null,
            tx_hash_signed: false,
            expires_at: claim.expiresAt,
          },
          { txHash, evidence, signer: null },
        );
        if (outcome.type === "claim_not_found") throw new Error("the new claim vanished");
        if (outcome.type !== "attached") throw new Refused(outcome);
      }
      return claim.id;
    });
  } catch (error) {
    if (error instanceof Refused) return error.result;
    throw error;
  }
  // Read again: attaching the tx hash changed the claim.
  const claim = await readClaim(deps.sql, claimId);
  if (!claim) throw new Error(`Claim ${claimId} vanished after creation`);
  return { type: "created", claim, reused: false };
}

/** What is stored of a client: a digest, enough to count by, not an address to keep. */
function clientDigest(client: string): string {
  return createHash("sha256").update(client).digest("hex").slice(0, 32);
}
