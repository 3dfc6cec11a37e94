import { index, onchainTable, type PgColumnsBuilders, primaryKey } from "ponder";

/**
 * Indexed facts only: every USDC transfer to `pay_to` and every one from the payout wallet.
 * Keyed by (tx hash, log index), the identity of a transfer. Addresses are lowercase.
 * The service reads these through the views schema `chain`, never the per-build schema.
 */

const transferColumns = (t: PgColumnsBuilders) => ({
  txHash: t.hex().notNull(),
  logIndex: t.integer().notNull(),
  blockNumber: t.bigint().notNull(),
  blockHash: t.hex().notNull(),
  blockTimestamp: t.bigint().notNull(),
  transactionIndex: t.integer().notNull(),
  from: t.hex().notNull(),
  to: t.hex().notNull(),
  value: t.bigint().notNull(),
});

export const incomingTransfer = onchainTable(
  "incoming_transfer",
  (t) => ({
    ...transferColumns(t),
    /** EIP-3009 nonce when this transfer came from transferWithAuthorization; else null. */
    authorizationNonce: t.hex(),
  }),
  (table) => ({
    pk: primaryKey({ columns: [table.txHash, table.logIndex] }),
    byPosition: index().on(table.blockNumber, table.logIndex),
    byNonce: index().on(table.authorizationNonce),
  }),
);

export const outgoingTransfer = onchainTable("outgoing_transfer", transferColumns, (table) => ({
  pk: primaryKey({ columns: [table.txHash, table.logIndex] }),
  byPosition: index().on(table.blockNumber, table.logIndex),
}));
