import { ponder } from "ponder:registry";
import { incomingTransfer, outgoingTransfer } from "ponder:schema";
import { authorizationNonceOf } from "./authorizationNonce.ts";

// Indexing functions write facts only: they re-run on reorgs, crash recovery and redeploys.

interface TransferEvent {
  args: { from: `0x${string}`; to: `0x${string}`; value: bigint };
  log: { logIndex: number; address: `0x${string}` };
  block: { number: bigint; hash: `0x${string}`; timestamp: bigint };
  transaction: {
    hash: `0x${string}`;
    transactionIndex: number;
    to: `0x${string}` | null;
    input: `0x${string}`;
  };
}

function transferFacts(event: TransferEvent) {
  return {
    txHash: event.transaction.hash,
    logIndex: event.log.logIndex,
    blockNumber: event.block.number,
    blockHash: event.block.hash,
    blockTimestamp: event.block.timestamp,
    transactionIndex: event.transaction.transactionIndex,
    from: event.args.from.toLowerCase() as `0x${string}`,
    to: event.args.to.toLowerCase() as `0x${string}`,
    value: event.args.value,
  };
}

ponder.on("IncomingUsdc:Transfer", async ({ event, context }) => {
  const authorizationNonce = await authorizationNonceOf(
    {
      token: event.log.address,
      txHash: event.transaction.hash,
      txTo: event.transaction.to,
      txInput: event.transaction.input,
      logIndex: event.log.logIndex,
      from: event.args.from,
      to: event.args.to,
      value: event.args.value,
      blockHash: event.block.hash,
    },
    context.client,
  );
  await context.db.insert(incomingTransfer).values({ ...transferFacts(event), authorizationNonce });
});

ponder.on("OutgoingUsdc:Transfer", async ({ event, context }) => {
  await context.db.insert(outgoingTransfer).values(transferFacts(event));
});
