import type { PrivateKeyAccount } from "viem/accounts";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import type { Transaction } from "../db/connect.ts";
import { localAccount } from "../signing/localAccount.ts";
import { receiptMessage } from "./receiptMessage.ts";

export interface ReceiptIssuer {
  signer: PrivateKeyAccount;
  service: string;
  site: string;
  chainId: number;
}

/** The one place the receipt's signer and its service facts come from. */
export function receiptIssuer(config: ServiceConfig): ReceiptIssuer {
  return {
    signer: localAccount(config.receipts.privateKey),
    service: config.serviceName,
    site: config.http.publicUrl,
    chainId: config.chain.chainId,
  };
}

/** What a receipt names: the claim, its holder, the payment and the payout. */
export interface ReceiptFacts {
  claimId: string;
  holder: string;
  paymentTx: string;
  paymentBlock: bigint;
  payoutTx: string;
  payoutBlock: bigint;
}

/**
 * Signs (EIP-191 personal_sign) and stores the receipts of claims whose payouts are mined, in
 * one insert. Runs inside the transaction that completes the claims; a claim that has a
 * receipt already keeps the first one.
 */
export async function issueReceipts(
  transaction: Transaction,
  issuer: ReceiptIssuer,
  claims: ReceiptFacts[],
): Promise<void> {
  if (claims.length === 0) return;
  const { signer } = issuer;
  const issuedAt = new Date();
  const receipts: {
    claim_id: string;
    message: string;
    signature: string;
    signer: string;
    issued_at: Date;
  }[] = [];
  for (const claim of claims) {
    const message = receiptMessage({
      service: issuer.service,
      site: issuer.site,
      holder: claim.holder,
      claimId: claim.claimId,
      paymentTx: claim.paymentTx,
      paymentBlock: claim.paymentBlock,
      payoutTx: claim.payoutTx,
      payoutBlock: claim.payoutBlock,
      chainId: issuer.chainId,
      issuedAt,
    });
    const signature = await signer.signMessage({ message });
    receipts.push({
      claim_id: claim.claimId,
      message,
      signature,
      signer: signer.address,
      issued_at: issuedAt,
    });
  }
  await transaction`
    insert into app.receipts ${transaction(receipts)}
    on conflict (claim_id) do nothing`;
}
