import { formatUsdc, PAYOUT_ATOMIC } from "../money.ts";
import { checksummed } from "../schemas/checksummedAddress.ts";

export interface ReceiptFacts {
  service: string;
  site: string;
  holder: string;
  claimId: string;
  paymentTx: string;
  /** The blocks the service saw them in: a receipt is signed once the payout is mined. */
  paymentBlock?: bigint | undefined;
  payoutTx: string;
  payoutBlock?: bigint | undefined;
  chainId: number;
  issuedAt: Date;
}

const HEADER = "pay-and-earn receipt";

/**
 * The signed statement, one fact per line so a person can read it and a program can parse
 * it. The wording of the earning line is part of the contract: do not change it. The payout is
 * signed for once mined, not once final: the blocks it names are the ones the service saw, and
 * POST /api/receipts/verify says where the transactions stand now.
 */
export function receiptMessage(facts: ReceiptFacts): string {
  return [
    HEADER,
    `Service: ${facts.service}`,
    `Site: ${facts.site}`,
    `Holder: ${checksummed(facts.holder)}`,
    `Statement: the holder earned ${formatUsdc(PAYOUT_ATOMIC)} USDC`,
    `Claim: ${facts.claimId}`,
    `Payment tx: ${facts.paymentTx}`,
    ...(facts.paymentBlock !== undefined ? [`Payment block: ${facts.paymentBlock}`] : []),
    `Payout tx: ${facts.payoutTx}`,
    ...(facts.payoutBlock !== undefined ? [`Payout block: ${facts.payoutBlock}`] : []),
    `Chain id: ${facts.chainId}`,
    `Issued at: ${facts.issuedAt.toISOString()}`,
  ].join("\n");
}

/** The facts back out of a message, or null when it is not one of ours in shape. */
export function parseReceiptMessage(message: string): Record<string, string> | null {
  const [header, ...lines] = message.split("\n");
  if (header !== HEADER) return null;
  const facts: Record<string, string> = {};
  for (const line of lines) {
    const separator = line.indexOf(": ");
    if (separator <= 0) return null;
    facts[line.slice(0, separator)] = line.slice(separator + 2);
  }
  return facts;
}
