import { type Address, type Hex, parseAbiItem } from "viem";
import type { Sql } from "../../api/db/connect.ts";
import { PRICE_ATOMIC } from "../../api/money.ts";
import { BASE_USDC_ADDRESS } from "../../contracts-abi/usdc.ts";
import type { TestChain } from "./chain.ts";

const transferEvent = parseAbiItem(
  "event Transfer(address indexed from, address indexed to, uint256 value)",
);

/**
 * The money's one invariant, from the chain's logs (RELIABILITY.md#the-invariant-and-the-attacks):
 * no payout went out without at least the price arriving at pay_to, at `confirmations` depth, for
 * it. Every USDC transfer of the payout wallet on the canonical chain is a payout of one claim (its
 * transaction is one of that claim's signed payouts); that claim's recorded payment is a transfer
 * the canonical chain has (known by its transaction, sender and value, which a reorg that mines it
 * again elsewhere keeps), to pay_to, of at least the price, with `confirmations` blocks on top of
 * it (its own included); and no claim is paid out twice. Returns one line per breach (an empty list
 * when the invariant holds).
 */
export async function payoutsWithoutPayment(
  chain: TestChain,
  sql: Sql,
  confirmations: number,
): Promise<string[]> {
  const head = await chain.publicClient.getBlockNumber({ cacheTime: 0 });
  const logsOf = (args: { from?: Address; to?: Address }) =>
    chain.publicClient.getLogs({
      address: BASE_USDC_ADDRESS,
      event: transferEvent,
      args,
      fromBlock: 0n,
      toBlock: head,
    });
  const [outgoing, incoming] = await Promise.all([
    logsOf({ from: chain.payout.address }),
    logsOf({ to: chain.payTo.address }),
  ]);
  const payoutTxs = await sql<{ claim_id: string; tx_hash: string }[]>`
    select claim_id, tx_hash from app.payouts where tx_hash is not null
    union
    select p.claim_id, a.tx_hash from app.payout_attempts a join app.payouts p using (nonce)`;
  const claimOfTx = new Map(payoutTxs.map((row) => [row.tx_hash.toLowerCase(), row.claim_id]));
  const payments = await sql<
    { claim_id: string; tx_hash: string; from_address: string; value: string }[]
  >`select claim_id, tx_hash, from_address, value::text from app.payments`;
  const paymentOf = new Map(payments.map((row) => [row.claim_id, row]));

  const breaches: string[] = [];
  const paidOut = new Set<string>();
  for (const payout of outgoing) {
    const tx = payout.transactionHash.toLowerCase();
    const claimId = claimOfTx.get(tx);
    if (!claimId) {
      breaches.push(`payout ${tx} belongs to no claim`);
      continue;
    }
    const payment = paymentOf.get(claimId);
    if (!payment) {
      breaches.push(`payout ${tx} of ${claimId}: the claim has no payment`);
      continue;
    }
    const arrived = incoming.filter(
      (log) =>
        log.transactionHash.toLowerCase() === payment.tx_hash &&
        (log.args.from as Hex).toLowerCase() === payment.from_address &&
        log.args.value === BigInt(payment.value) &&
        (log.args.value as bigint) >= PRICE_ATOMIC &&
        head - log.blockNumber + 1n >= BigInt(confirmations),
    );
    if (arrived.length === 0) {
      const seen = incoming
        .filter((log) => log.transactionHash.toLowerCase() === payment.tx_hash)
        .map((log) => `${log.args.value} in block ${log.blockNumber}`);
      breaches.push(
        `payout ${tx} of ${claimId}: no transfer of at least the price to pay_to at depth ${confirmations} in ${payment.tx_hash} (the chain has: ${seen.join(", ") || "nothing"})`,
      );
      continue;
    }
    // A claim has one payment (the table's key) and a payment one claim: a second payout of
    // the same claim is a second payout for the same money.
    if (paidOut.has(claimId)) breaches.push(`claim ${claimId} paid out more than once (${tx})`);
    paidOut.add(claimId);
  }
  return breaches;
}
