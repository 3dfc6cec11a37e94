import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { Hex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../api/db/connect.ts";
import {
  PonderPortTakenError,
  type RunningPonder,
  startPonder,
  startReadyPonder,
} from "../../scripts/devnet/ponder.ts";
import type { TestChain } from "../support/chain.ts";
import { type ChainWithDatabase, startChainWithDatabase } from "../support/chainWithDatabase.ts";
import type { TestDatabase } from "../support/database.ts";
import { transferWithAuthorization } from "../support/eip3009.ts";
import { startTestIndexer, testIndexerEnvironment } from "../support/indexer.ts";
import { freePort, listenOn } from "../support/ports.ts";
import { USDC } from "../support/usdc.ts";
import { waitFor } from "../support/waitFor.ts";

interface TransferRow {
  tx_hash: string;
  log_index: number;
  block_number: string;
  block_hash: string;
  block_timestamp: string;
  from: string;
  to: string;
  value: string;
  authorization_nonce: string | null;
}

let chain: TestChain;
let database: TestDatabase;
let ponder: RunningPonder;
let sql: Database;
let chainWithDatabase: ChainWithDatabase | undefined;

beforeAll(async () => {
  ({ chain, database, sql } = chainWithDatabase = await startChainWithDatabase());
  ponder = await startTestIndexer(chain, database.url);
});

afterAll(async () => {
  await ponder?.stop();
  await chainWithDatabase?.stop();
});

function incomingRow(txHash: Hex) {
  return sql<TransferRow[]>`select * from chain.incoming_transfer where tx_hash = ${txHash}`.then(
    (rows) => rows[0],
  );
}

function outgoingRow(txHash: Hex) {
  return sql<TransferRow[]>`select * from chain.outgoing_transfer where tx_hash = ${txHash}`.then(
    (rows) => rows[0],
  );
}

describe("the indexer (Ponder → chain views)", () => {
  it("records a transfer to pay_to with its facts", async () => {
    const [payer] = chain.users;
    if (!payer) throw new Error("no user account");
    const hash = await chain.transferUsdc(payer, chain.payTo.address, 10n * USDC);
    const receipt = await chain.publicClient.getTransactionReceipt({ hash });
    const block = await chain.publicClient.getBlock({ blockNumber: receipt.blockNumber });

    const row = await waitFor(() => incomingRow(hash), { what: "the incoming transfer row" });

    expect(row).toMatchObject({
      tx_hash: hash,
      log_index: receipt.logs[0]?.logIndex,
      block_number: String(receipt.blockNumber),
      block_hash: receipt.blockHash,
      block_timestamp: String(block.timestamp),
      from: payer.address.toLowerCase(),
      to: chain.payTo.address.toLowerCase(),
      value: String(10n * USDC),
      authorization_nonce: null,
    });
  });

  it("ignores a transfer to another address", async () => {
    const [payer, stranger] = chain.users;
    if (!payer || !stranger) throw new Error("no user accounts");
    const elsewhere = await chain.transferUsdc(payer, stranger.address, 3n * USDC);
    // A later transfer to pay_to proves the indexer has processed the block of the first.
    const marker = await chain.transferUsdc(payer, chain.payTo.address, 1n);
    await waitFor(() => incomingRow(marker), { what: "the marker transfer" });

    expect(await incomingRow(elsewhere)).toBeUndefined();
    expect(await outgoingRow(elsewhere)).toBeUndefined();
  });

  it("records the EIP-3009 nonce of a transferWithAuthorization", async () => {
    const [, , payer] = chain.users;
    if (!payer) throw new Error("no user account");
    const { hash, nonce } = await transferWithAuthorization(
      chain,
      payer,
      chain.facilitator,
      chain.payTo.address,
      10n * USDC,
    );

    const row = await waitFor(() => incomingRow(hash), { what: "the authorized transfer row" });

    expect(row.authorization_nonce).toBe(nonce.toLowerCase());
    expect(row.from).toBe(payer.address.toLowerCase());
  });

  it("records a transfer from the payout wallet in the outgoing table", async () => {
    const [, , , recipient] = chain.users;
    if (!recipient) throw new Error("no user account");
    const hash = await chain.transferUsdc(chain.payout, recipient.address, 1n * USDC);

    const row = await waitFor(() => outgoingRow(hash), { what: "the outgoing transfer row" });

    expect(row).toMatchObject({
      from: chain.payout.address.toLowerCase(),
      to: recipient.address.toLowerCase(),
      value: String(1n * USDC),
    });
    expect(await incomingRow(hash)).toBeUndefined();
  });

  it("removes a transfer whose block is reorged away", async () => {
    const [, , , , payer] = chain.users;
    if (!payer) throw new Error("no user account");
    const hash = await chain.transferUsdc(payer, chain.payTo.address, 10n * USDC);
    await waitFor(() => incomingRow(hash), { what: "the transfer before the reorg" });

    // Replace the transfer's block with an empty one at the same height, then build on top
    // so the indexer sees a new head whose ancestry no longer has the transfer.
    await chain.testClient.request({ method: "anvil_reorg" as never, params: [1, []] as never });
    await chain.testClient.mine({ blocks: 2 });

    await waitFor(async () => (await incomingRow(hash)) === undefined, {
      what: "the reorged transfer to disappear",
    });
    expect(await chain.publicClient.getTransactionReceipt({ hash }).catch(() => null)).toBeNull();
  });

  it("is followed to the next port when its own was taken before it started", async () => {
    // Something else answers on the port Ponder was given, ready, as another Ponder would:
    // Ponder moves on by itself, and only its own answer may say it is ready.
    const { taken, takenPort } = await squatBesideAFreePort();
    let moved: RunningPonder | undefined;
    try {
      moved = await startTestIndexer(chain, database.url, {
        port: takenPort,
        viewsSchema: "chain_moved",
      });
      expect(Number(new URL(moved.url).port)).toBe(takenPort + 1);
      expect((await fetch(`${moved.url}/ready`)).status).toBe(200);
    } finally {
      await moved?.stop();
      taken.close();
    }
  }, 150_000);

  it("is started again on another port when its port and the next were both taken", async () => {
    // Ponder tries the next port once and then ends, without having served: only that ending
    // (PonderPortTakenError) is worth a second start, on the same schema, elsewhere.
    const { taken, takenPort } = await squatBesideAFreePort();
    const next = createServer();
    expect(await listenOn(next, takenPort + 1)).toBe(true);
    const options = {
      env: testIndexerEnvironment(chain, database.url),
      schema: `indexer_${randomBytes(4).toString("hex")}`,
      viewsSchema: "chain_taken",
    };
    const ponderOnTakenPorts = startPonder({ ...options, port: takenPort });
    let startedAgain: RunningPonder | undefined;
    try {
      await expect(ponderOnTakenPorts.waitUntilReady(60_000)).rejects.toBeInstanceOf(
        PonderPortTakenError,
      );
      await ponderOnTakenPorts.stop();
      const ports = [takenPort];
      startedAgain = await startReadyPonder(options, async () => {
        ports.push(ports.length === 1 ? takenPort : await freePort());
        return ports.at(-1) as number;
      });
      // A second start at least; Ponder may yet move on from a pick taken meanwhile.
      expect(ports.length).toBeGreaterThanOrEqual(3);
      const last = ports.at(-1) as number;
      expect([last, last + 1]).toContain(Number(new URL(startedAgain.url).port));
      expect((await fetch(`${startedAgain.url}/ready`)).status).toBe(200);
    } finally {
      await ponderOnTakenPorts.stop();
      await startedAgain?.stop();
      taken.close();
      next.close();
    }
  }, 150_000);
});

/**
 * A server answering 200 on a port whose next one was free a moment ago, both picked where
 * outgoing connections do not take theirs (freePort): Ponder's second try is its last
 * (docs/traps.md#ponder), so the next port must stay free for the test to say anything.
 */
async function squatBesideAFreePort(): Promise<{ taken: Server; takenPort: number }> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await freePort();
    const taken = createServer((_request, response) => response.writeHead(200).end());
    const listening = await listenOn(taken, port);
    if (!listening) continue;
    const next = createServer();
    const nextFree = await listenOn(next, port + 1);
    if (nextFree) {
      await new Promise((resolve) => next.close(resolve));
      return { taken, takenPort: port };
    }
    await new Promise((resolve) => taken.close(resolve));
  }
  throw new Error("no two free ports side by side");
}
