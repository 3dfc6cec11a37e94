import type { Transaction } from "../db/connect.ts";

/**
 * A claim names the transaction that pays it (attaching a tx hash): no change of status, the
 * matcher still decides. `signed`: the client proved it is the transfer's sender, which lets
 * this claim take the hash from one that named it unsigned (api/claims/attachTx.ts).
 */
export async function nameTransaction(
  transaction: Transaction,
  claimId: string,
  hash: string,
  signed: boolean,
): Promise<void> {
  await transaction`
    update app.claims set tx_hash = ${hash}, tx_hash_signed = ${signed} where id = ${claimId}`;
}

/** The claim that named a hash unsigned gives it up to a signed attach of its sender. */
export async function releaseTransactionName(
  transaction: Transaction,
  claimId: string,
): Promise<void> {
  await transaction`update app.claims set tx_hash = null, tx_hash_signed = false where id = ${claimId}`;
}
