import { randomBytes } from "node:crypto";
import { getAddress, type Hex, verifyMessage } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../api/db/connect.ts";
import { PAYOUT_ATOMIC } from "../../api/money.ts";
import type { RunningService } from "../../api/service.ts";
import type { TestChain } from "../support/chain.ts";
import { type ChainWithDatabase, startChainWithDatabase } from "../support/chainWithDatabase.ts";
import type { TestDatabase } from "../support/database.ts";
import {
  callDevnetToken,
  countByRecipient,
  createPaidClaims,
  payoutRows,
  payoutTransfers,
  waitForStatus,
} from "../support/payouts.ts";
import { startTestService } from "../support/service.ts";

let chain: TestChain;
let database: TestDatabase;
let service: RunningService;
let sql: Database;
let chainWithDatabase: ChainWithDatabase | undefined;

beforeAll(async () => {
  ({ chain, database, sql } = chainWithDatabase = await startChainWithDatabase());
  service = await startTestService(chain, database.url, {
    PAYOUT_INTERVAL_MS: "50",
  });
});

afterAll(async () => {
  await service?.stop();
  await chainWithDatabase?.stop();
});

describe("payouts", () => {
  it("pays every paid claim exactly once, signs its receipt and queues mail where asked", async () => {
    const claims = await createPaidClaims(sql, 12, {
      email: (index) => (index % 3 === 0 ? `holder${index}@example.com` : null),
    });
    const ids = claims.map((claim) => claim.id);
    await waitForStatus(sql, ids, "completed");

    // The chain, not the database: one 1-USDC transfer to each payout address, no other.
    const transfers = await payoutTransfers(chain);
    const counts = countByRecipient(transfers);
    expect(transfers).toHaveLength(claims.length);
    for (const claim of claims) expect(counts.get(claim.payoutAddress)).toBe(1);
    for (const transfer of transfers) expect(transfer.value).toBe(PAYOUT_ATOMIC);

    // Nonces are consecutive and each payout row points at the mined transaction.
    const payouts = await payoutRows(sql);
    expect(payouts.map((payout) => payout.nonce)).toEqual(claims.map((_, index) => BigInt(index)));
    const minedHashes = new Set(transfers.map((transfer) => transfer.txHash));
    for (const payout of payouts) {
      expect(payout.status).toBe("confirmed");
      expect(minedHashes.has(payout.tx_hash)).toBe(true);
    }

    const receipts = await sql<
      { claim_id: string; message: string; signature: Hex; signer: string }[]
    >`select claim_id, message, signature, signer from app.receipts`;
    expect(receipts).toHaveLength(claims.length);
    for (const receipt of receipts) {
      const claim = claims.find((candidate) => candidate.id === receipt.claim_id);
      const payout = payouts.find((candidate) => candidate.claim_id === receipt.claim_id);
      expect(getAddress(receipt.signer)).toBe(chain.receiptSigner.address);
      expect(
        await verifyMessage({
          address: chain.receiptSigner.address,
          message: receipt.message,
          signature: receipt.signature,
        }),
      ).toBe(true);
      expect(receipt.message).toContain(`Payout tx: ${payout?.tx_hash}`);
      expect(receipt.message).toContain(`Payment tx: ${claim?.paymentTx}`);
      expect(receipt.message).toContain(`Holder: ${claim?.payoutAddress}`);
    }

    const outbox = await sql<{ claim_id: string; recipient: string }[]>`
      select claim_id, recipient from app.outbox where kind = 'receipt_mail'`;
    const withEmail = claims.filter((claim) => claim.email);
    expect(outbox.map((row) => row.claim_id).sort()).toEqual(
      withEmail.map((claim) => claim.id).sort(),
    );
    for (const row of outbox) {
      expect(row.recipient).toBe(withEmail.find((claim) => claim.id === row.claim_id)?.email);
    }
  });

  it("fails a claim whose payout reverts (blacklisted holder) and never sends it again", async () => {
    const before = (await payoutTransfers(chain)).length;
    // Blacklisted before the claim exists, so its payout is signed against a blocked holder.
    const blockedAddress = getAddress(`0x${randomBytes(20).toString("hex")}`);
    await callDevnetToken(chain, { functionName: "blacklist", args: [blockedAddress] });
    const [blocked, fine] = await createPaidClaims(sql, 2, { payoutAddresses: [blockedAddress] });
    if (!blocked || !fine) throw new Error("fixtures missing");

    await waitForStatus(sql, [fine.id], "completed");
    await waitForStatus(sql, [blocked.id], "failed");
    const [claim] = await sql<{ failure_reason: string }[]>`
      select failure_reason from app.claims where id = ${blocked.id}`;
    expect(claim?.failure_reason).toBe("payout_reverted");

    const [payout] = await sql<{ status: string; tx_hash: Hex; attempts: bigint }[]>`
      select p.status, p.tx_hash,
        (select count(*) from app.payout_attempts a where a.claim_id = p.claim_id) as attempts
      from app.payouts p where p.claim_id = ${blocked.id}`;
    expect(payout?.status).toBe("reverted");
    expect(payout?.attempts).toBe(1n);
    const receipt = await chain.publicClient.getTransactionReceipt({
      hash: payout?.tx_hash as Hex,
    });
    expect(receipt.status).toBe("reverted");

    // One more payout later: the reverted claim is not picked up again.
    const [later] = await createPaidClaims(sql, 1);
    await waitForStatus(sql, [later?.id as string], "completed");
    const transfers = await payoutTransfers(chain);
    expect(transfers).toHaveLength(before + 2);
    expect(countByRecipient(transfers).get(blocked.payoutAddress)).toBeUndefined();
    // Every transaction the wallet sent is a payout row: nothing was sent for it twice.
    const sent = await chain.publicClient.getTransactionCount({ address: chain.payout.address });
    const [rows] = await sql<{ count: bigint }[]>`select count(*) from app.payouts`;
    expect(BigInt(sent)).toBe(rows?.count);
    expect(await receiptsFor(blocked.id)).toBe(0n);
  });
});

async function receiptsFor(claimId: string): Promise<bigint> {
  const [row] = await sql<{ count: bigint }[]>`
    select count(*) from app.receipts where claim_id = ${claimId}`;
  return row?.count ?? 0n;
}
