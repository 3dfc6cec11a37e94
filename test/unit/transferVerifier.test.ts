import type { PublicClient } from "viem";
import { describe, expect, it } from "vitest";
import type { IncomingTransfer } from "../../api/chain/incomingTransfers.ts";
import { TransferVerifier } from "../../api/chain/verifyTransfers.ts";

/**
 * The matcher's re-check against an RPC that does not always tell the truth the first time:
 * a reply cut short, or a load-balanced RPC whose nodes disagree for a moment. (The real node's
 * behaviour, one read per block and a reorg, is in test/integration/matcherRecheck.test.ts.)
 */

const USDC = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";
const PAY_TO = "0x1111111111111111111111111111111111111111";
const BLOCK_A = `0x${"ab".repeat(32)}` as const;
const BLOCK_B = `0x${"cd".repeat(32)}` as const;
const tx = (n: number) => `0x${n.toString(16).padStart(64, "0")}` as const;
const sender = (n: number) => `0x${n.toString(16).padStart(40, "0")}` as const;

function transfer(n: number): IncomingTransfer {
  return {
    txHash: tx(n),
    logIndex: n,
    blockNumber: 100n,
    blockHash: BLOCK_A,
    blockTimestamp: 0n,
    from: sender(n),
    value: 10_000_000n,
    authorizationNonce: null,
    transferOrdinal: 1,
  };
}

function log(n: number, blockHash: string = BLOCK_A) {
  return {
    blockHash,
    blockNumber: 100n,
    transactionHash: tx(n),
    logIndex: n,
    args: { from: sender(n), to: PAY_TO, value: 10_000_000n },
  };
}

/** An RPC whose answers the test writes; it counts what it was asked. */
function fakeChain(answers: {
  logs: (call: number) => ReturnType<typeof log>[] | Error;
  header: (call: number) => string;
}) {
  const calls = { logs: 0, header: 0, receipts: 0 };
  const chain = {
    getLogs: async () => {
      calls.logs += 1;
      const answer = answers.logs(calls.logs);
      if (answer instanceof Error) throw answer;
      return answer;
    },
    getBlock: async () => {
      calls.header += 1;
      return { hash: answers.header(calls.header) };
    },
    getTransactionReceipt: async () => {
      calls.receipts += 1;
      throw Object.assign(new Error("not found"), { name: "TransactionReceiptNotFoundError" });
    },
  } as unknown as PublicClient;
  return { verifier: new TransferVerifier(chain, USDC, PAY_TO), calls };
}

describe("TransferVerifier", () => {
  it("reads a block's logs once and then only its header, while the hash stands", async () => {
    const { verifier, calls } = fakeChain({
      logs: () => [log(1), log(2), log(3)],
      header: () => BLOCK_A,
    });
    for (const n of [1, 2, 3]) expect(await verifier.verifiedPrefix([transfer(n)])).toBe(1);
    expect(calls.logs).toBe(1);
    expect(calls.header).toBe(3);
  });

  it("reads the block again after a kept answer failed a transfer (an incomplete first reply)", async () => {
    const { verifier, calls } = fakeChain({
      logs: (call) => (call === 1 ? [log(1)] : [log(1), log(2)]),
      header: () => BLOCK_A,
    });
    expect(await verifier.verifiedPrefix([transfer(1), transfer(2)])).toBe(1);

    expect(await verifier.verifiedPrefix([transfer(2)])).toBe(1);
    expect(calls.logs).toBe(2);
  });

  it("counts only logs of the block the header names, on a first read and after a reorg", async () => {
    // The header's node has block B at this height; the logs' node still has block A.
    const first = fakeChain({ logs: () => [log(1)], header: () => BLOCK_B });
    expect(await first.verifier.verifiedPrefix([transfer(1)])).toBe(0);

    const { verifier } = fakeChain({
      logs: () => [log(1), log(2)],
      header: (call) => (call === 1 ? BLOCK_A : BLOCK_B),
    });
    expect(await verifier.verifiedPrefix([transfer(1)])).toBe(1);
    expect(await verifier.verifiedPrefix([transfer(2)])).toBe(0);
  });

  it("does not keep a reply with logs of another block in it", async () => {
    const { verifier, calls } = fakeChain({
      logs: () => [log(1), log(2, BLOCK_B)],
      header: () => BLOCK_A,
    });
    expect(await verifier.verifiedPrefix([transfer(1)])).toBe(1);
    expect(await verifier.verifiedPrefix([transfer(1)])).toBe(1);
    expect(calls.logs).toBe(2);
  });

  it("after the logs failed, checks the block's batches by receipts without asking logs again", async () => {
    const { verifier, calls } = fakeChain({
      logs: () => new Error("The request took too long to respond."),
      header: () => BLOCK_A,
    });
    expect(await verifier.verifiedPrefix([transfer(1)])).toBe(0);
    expect(await verifier.verifiedPrefix([transfer(1)])).toBe(0);
    expect(calls.logs).toBe(1);
    expect(calls.receipts).toBe(2);
  });
});
