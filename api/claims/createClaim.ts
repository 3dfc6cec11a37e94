import { type Address, type Hex, zeroAddress } from "viem";
import type { Sql } from "../db/connect.ts";
import { PRICE_ATOMIC } from "../money.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import type { ServiceDeps } from "../workers/serviceDeps.ts";
import { type AttachOutcome, attachTxInTransaction } from "./attachTx.ts";
import { newClaimId } from "./claimIds.ts";
import { reserveUniqueAmount } from "./reserveAmount.ts";

export interface NewClaim {
  flow: "claim" | "x402" | "mail";
  payoutAddress: Address;
  txHash?: Hex | undefined;
  email?: string | undefined;
  agentName?: string | undefined;
}

export type CreateOutcome =
  | { type: "created"; claimId: string }
  | { type: "invalid_payout_address"; detail: string }
  | { type: "amount_space_exhausted" }
  | Exclude<AttachOutcome, { type: "attached" }>;

/** Carries a refusal out of the transaction so that nothing of the claim is kept. */
class Refused extends Error {
  readonly outcome: CreateOutcome;
  constructor(outcome: CreateOutcome) {
    super(outcome.type);
    this.outcome = outcome;
  }
}

/**
 * A new claim, awaiting payment. Variant A reserves its unique amount; a tx hash given at
 * creation is attached under the same rules as later (a refusal creates no claim).
 */
export async function createClaim(
  deps: ServiceDeps,
  input: NewClaim,
  options: {
    /** More to write in the creating transaction (x402: the payer's authorization). */
    alsoInTransaction?: (transaction: Sql, claimId: string) => Promise<void>;
  } = {},
): Promise<CreateOutcome> {
  const refusal = refusedPayoutAddress(deps, input.payoutAddress);
  if (refusal) return { type: "invalid_payout_address", detail: refusal };

  const { claims } = deps.config;
  const claimId = newClaimId();
  const expiresAt = new Date(Date.now() + claims.lifetimeSeconds * 1000);
  try {
    await deps.sql.begin(async (transaction) => {
      if (input.txHash) await transaction`select pg_advisory_xact_lock(${LOCK_KEYS.matching})`;
      await transaction`
        insert into app.claims
          (id, flow, payout_address, email, agent_name, amount_due, expires_at)
        values (${claimId}, ${input.flow}, ${input.payoutAddress.toLowerCase()},
          ${input.email ?? null}, ${input.agentName ?? null}, ${String(PRICE_ATOMIC)}, ${expiresAt})`;

      let amountDue = PRICE_ATOMIC;
      if (claims.variant === "A" && input.flow !== "x402") {
        const heldUntil = new Date(expiresAt.getTime() + claims.amountHoldSeconds * 1000);
        const reserved = await reserveUniqueAmount(transaction, claimId, heldUntil);
        if (reserved === null) throw new Refused({ type: "amount_space_exhausted" });
        amountDue = reserved;
        await transaction`
          update app.claims set amount_due = ${String(amountDue)} where id = ${claimId}`;
      }

      if (input.txHash) {
        const outcome = await attachTxInTransaction(
          transaction,
          deps,
          {
            id: claimId,
            status: "awaiting_payment",
            payout_address: input.payoutAddress.toLowerCase(),
            amount_due: String(amountDue),
            tx_hash: null,
            expires_at: expiresAt,
          },
          input.txHash,
        );
        if (outcome.type !== "attached") throw new Refused(outcome);
      }
      await options.alsoInTransaction?.(transaction, claimId);
    });
  } catch (error) {
    if (error instanceof Refused) return error.outcome;
    throw error;
  }
  return { type: "created", claimId };
}

/** Addresses a payout must never go to: burnt, stuck in a contract, or back to ourselves. */
export function refusedPayoutAddress(
  deps: Pick<ServiceDeps, "config">,
  address: Address,
): string | null {
  const { chain, payout } = deps.config;
  const lower = address.toLowerCase();
  if (lower === zeroAddress) return "the zero address cannot receive a payout";
  if (lower === chain.usdcAddress.toLowerCase()) return "the USDC contract cannot receive a payout";
  if (lower === chain.payTo.toLowerCase()) return "pay_to is the service's own address";
  if (lower === payout.address.toLowerCase()) return "that is the service's payout wallet";
  return null;
}
