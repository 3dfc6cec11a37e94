import type { PrivateKeyAccount } from "viem/accounts";
import type { z } from "zod";
import type { offerResponse, receiptResponse } from "../../api/schemas/responses.ts";
import type { PayerChain, WalletFunds } from "../payer.ts";
import type { OfflineVerdict } from "../receiptCheck.ts";
import type { ServiceClient } from "../serviceClient.ts";

export type Offer = z.output<typeof offerResponse>;
export type Receipt = Pick<
  z.output<typeof receiptResponse>,
  "message" | "signature" | "signer" | "issued_at"
>;

/** What `earn` knows as its steps go (cli/earn/*Steps.ts fill it in). */
export interface EarnContext {
  via: "claim" | "x402";
  dryRun: boolean;
  request: { payout_address: string; agent_name?: string; email?: string };
  service: ServiceClient;
  rpcOption: string | undefined;
  account: PrivateKeyAccount | undefined;
  pollMs: number;
  /** When waiting for the payment and payout gives up (ms since the epoch). */
  deadline: number;
  offer?: Offer;
  chain?: PayerChain;
  funds?: WalletFunds;
  claimId?: string;
  amountAtomic?: bigint;
  paymentTx?: string;
  payoutTx?: string | null;
  status?: string;
  receipt?: Receipt | null;
  verdict?: OfflineVerdict;
  /** What a dry run would do, in words. */
  plan?: string[];
}
