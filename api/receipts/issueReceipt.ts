import { type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import type { Sql } from "../db/connect.ts";
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
    signer: privateKeyToAccount(config.receipts.privateKey),
    service: config.serviceName,
    site: config.http.publicUrl,
    chainId: config.chain.chainId,
  };
}

/**
 * Signs (EIP-191 personal_sign) and stores the receipt of a claim whose payout is mined.
 * Runs inside the transaction that completes the claim; a second call keeps the first receipt.
 */
export async function issueReceipt(
  transaction: Sql,
  issuer: ReceiptIssuer,
  claim: {
    claimId: string;
    holder: string;
    paymentTx: string;
    paymentBlock: bigint;
    payoutTx: string;
    payoutBlock: bigint;
  },
): Promise<void> {
  const { signer } = issuer;
  const issuedAt = new Date();
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
  await transaction`
    insert into app.receipts (claim_id, message, signature, signer, issued_at)
    values (${claim.claimId}, ${message}, ${signature}, ${signer.address}, ${issuedAt})
    on conflict (claim_id) do nothing`;
}
