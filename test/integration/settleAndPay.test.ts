import {
  type Address,
  createPublicClient,
  encodePacked,
  erc20Abi,
  type Hex,
  http,
  type PublicClient,
  parseEventLogs,
  type TransactionReceipt,
} from "viem";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createLogger } from "../../api/logger.ts";
import { settleAndPayCode } from "../../api/x402/settleAndPayCode.ts";
import { settleAndPayAbi } from "../../contracts-abi/settleAndPay.ts";
import { BASE_USDC_ADDRESS, usdcAbi } from "../../contracts-abi/usdc.ts";
import type { DevnetAccount } from "../../scripts/devnet/accounts.ts";
import { devnetSettleAndPayAddress } from "../../scripts/devnet/settleAndPay.ts";
import { startTestChain, type TestChain } from "../support/chain.ts";
import {
  type SignedAuthorization,
  signTransferAuthorization,
  submitAuthorization,
} from "../support/eip3009.ts";
import { freePort } from "../support/ports.ts";
import { USDC } from "../support/usdc.ts";

// The contract on its own, on Anvil: both legs in one transaction, either leg's revert taking
// the other with it, and what a stranger can do with it (docs/payments.md#one-transaction-settlement).

const blacklistAbi = [
  {
    type: "function",
    name: "blacklist",
    stateMutability: "nonpayable",
    inputs: [{ name: "account", type: "address" }],
    outputs: [],
  },
] as const;

let chain: TestChain;
let contract: Address;
let snapshot: Hex;

beforeAll(async () => {
  chain = await startTestChain();
  contract = devnetSettleAndPayAddress(chain.accounts);
}, 60_000);
afterAll(() => chain?.stop());

beforeEach(async () => {
  if (snapshot) await chain.testClient.revert({ id: snapshot });
  snapshot = await chain.testClient.snapshot();
});

const signatureOf = (authorization: SignedAuthorization): Hex =>
  encodePacked(
    ["bytes32", "bytes32", "uint8"],
    [authorization.r, authorization.s, authorization.v],
  );

/** `caller` sends settleAndPay for `authorization`, paying `recipient` 1 USDC; waits for it. */
async function settleAndPay(
  caller: DevnetAccount,
  authorization: SignedAuthorization,
  recipient: Address,
): Promise<TransactionReceipt> {
  const { from, to, value, validAfter, validBefore, nonce } = authorization;
  const hash = await chain.walletFor(caller).writeContract({
    address: contract,
    abi: settleAndPayAbi,
    functionName: "settleAndPay",
    args: [
      BASE_USDC_ADDRESS,
      { from, to, value, validAfter, validBefore, nonce, signature: signatureOf(authorization) },
      recipient,
      USDC,
    ],
    // A fixed limit: estimation would refuse to send a transaction that reverts.
    gas: 300_000n,
  });
  return chain.publicClient.waitForTransactionReceipt({ hash });
}

const authorizationUsed = (payer: Address, nonce: Hex) =>
  chain.publicClient.readContract({
    address: BASE_USDC_ADDRESS,
    abi: usdcAbi,
    functionName: "authorizationState",
    args: [payer, nonce],
  });

describe("SettleAndPay", () => {
  it("settles the authorization and pays out from the caller's allowance, in one transaction", async () => {
    const payer = chain.user(0);
    const recipient = chain.user(1).address;
    const before = {
      payer: await chain.usdcBalance(payer.address),
      payTo: await chain.usdcBalance(chain.payTo.address),
      payout: await chain.usdcBalance(chain.payout.address),
      recipient: await chain.usdcBalance(recipient),
    };
    const authorization = await signTransferAuthorization(payer, chain.payTo.address, 10n * USDC);

    const receipt = await settleAndPay(chain.payout, authorization, recipient);

    expect(receipt.status).toBe("success");
    // Both legs in the one transaction, and the payout's Transfer is from the payout wallet
    // itself: the indexer and the ledger audit read it as any payout.
    const transfers = parseEventLogs({ abi: usdcAbi, logs: receipt.logs, eventName: "Transfer" });
    expect(
      transfers.map((log) => [log.args.from, log.args.to, log.args.value, log.address]),
    ).toEqual([
      [payer.address, chain.payTo.address, 10n * USDC, BASE_USDC_ADDRESS.toLowerCase()],
      [chain.payout.address, recipient, USDC, BASE_USDC_ADDRESS.toLowerCase()],
    ]);
    expect(await chain.usdcBalance(payer.address)).toBe(before.payer - 10n * USDC);
    expect(await chain.usdcBalance(chain.payTo.address)).toBe(before.payTo + 10n * USDC);
    expect(await chain.usdcBalance(chain.payout.address)).toBe(before.payout - USDC);
    expect(await chain.usdcBalance(recipient)).toBe(before.recipient + USDC);
    expect(await authorizationUsed(payer.address, authorization.nonce)).toBe(true);
  });

  it("pays nothing out when the authorization was used first (the payer's own front-run)", async () => {
    const payer = chain.user(0);
    const recipient = chain.user(1).address;
    const authorization = await signTransferAuthorization(payer, chain.payTo.address, 10n * USDC);
    // The payer spends the same nonce on a 1-unit transfer of its own first.
    const trifle = await signTransferAuthorization(payer, chain.payTo.address, 1n, {
      nonce: authorization.nonce,
    });
    const frontRun = await submitAuthorization(chain, payer, trifle);
    expect((await chain.publicClient.waitForTransactionReceipt({ hash: frontRun })).status).toBe(
      "success",
    );
    const payoutBefore = await chain.usdcBalance(chain.payout.address);
    const recipientBefore = await chain.usdcBalance(recipient);

    const receipt = await settleAndPay(chain.payout, authorization, recipient);

    expect(receipt.status).toBe("reverted");
    expect(receipt.logs).toEqual([]);
    expect(await chain.usdcBalance(chain.payout.address)).toBe(payoutBefore);
    expect(await chain.usdcBalance(recipient)).toBe(recipientBefore);
  });

  it("takes no payment when the payout leg reverts (a blacklisted recipient)", async () => {
    const payer = chain.user(0);
    const recipient = chain.user(2).address;
    await chain.publicClient.waitForTransactionReceipt({
      hash: await chain.walletFor(chain.user(3)).writeContract({
        address: BASE_USDC_ADDRESS,
        abi: blacklistAbi,
        functionName: "blacklist",
        args: [recipient],
      }),
    });
    const payerBefore = await chain.usdcBalance(payer.address);
    const payToBefore = await chain.usdcBalance(chain.payTo.address);
    const authorization = await signTransferAuthorization(payer, chain.payTo.address, 10n * USDC);

    const receipt = await settleAndPay(chain.payout, authorization, recipient);

    expect(receipt.status).toBe("reverted");
    expect(await chain.usdcBalance(payer.address)).toBe(payerBefore);
    expect(await chain.usdcBalance(chain.payTo.address)).toBe(payToBefore);
    // The payment leg did not stand alone: the authorization is still unused.
    expect(await authorizationUsed(payer.address, authorization.nonce)).toBe(false);
  });

  it("moves only the caller's own tokens: a stranger with a copied authorization cannot touch the payout wallet", async () => {
    const payer = chain.user(0);
    const stranger = chain.user(4);
    const allowanceBefore = await chain.publicClient.readContract({
      address: BASE_USDC_ADDRESS,
      abi: erc20Abi,
      functionName: "allowance",
      args: [chain.payout.address, contract],
    });
    expect(allowanceBefore).toBeGreaterThan(0n);
    const payoutBefore = await chain.usdcBalance(chain.payout.address);
    const authorization = await signTransferAuthorization(payer, chain.payTo.address, 10n * USDC);

    // The stranger has given the contract no allowance: the payout leg fails, and with it all.
    const receipt = await settleAndPay(stranger, authorization, stranger.address);

    expect(receipt.status).toBe("reverted");
    expect(await chain.usdcBalance(chain.payout.address)).toBe(payoutBefore);
    expect(
      await chain.publicClient.readContract({
        address: BASE_USDC_ADDRESS,
        abi: erc20Abi,
        functionName: "allowance",
        args: [chain.payout.address, contract],
      }),
    ).toBe(allowanceBefore);
    expect(await authorizationUsed(payer.address, authorization.nonce)).toBe(false);
  });

  it("pays a copied authorization only to its own pay_to, and the payout only from the caller", async () => {
    const payer = chain.user(0);
    const stranger = chain.user(4);
    // A stranger who has an allowance of its own can settle someone's copied authorization
    // through the contract, exactly as it could at the token directly: it pays pay_to (which
    // the payer signed) and the stranger's own 1 USDC; the payout wallet is untouched.
    await chain.publicClient.waitForTransactionReceipt({
      hash: await chain.walletFor(stranger).writeContract({
        address: BASE_USDC_ADDRESS,
        abi: erc20Abi,
        functionName: "approve",
        args: [contract, USDC],
      }),
    });
    const payoutBefore = await chain.usdcBalance(chain.payout.address);
    const payToBefore = await chain.usdcBalance(chain.payTo.address);
    const authorization = await signTransferAuthorization(payer, chain.payTo.address, 10n * USDC);

    const receipt = await settleAndPay(stranger, authorization, stranger.address);

    expect(receipt.status).toBe("success");
    expect(await chain.usdcBalance(chain.payTo.address)).toBe(payToBefore + 10n * USDC);
    expect(await chain.usdcBalance(chain.payout.address)).toBe(payoutBefore);
  });
});

describe("the service's check of SETTLE_AND_PAY_ADDRESS", () => {
  const check = (address: Address, rpc: Pick<PublicClient, "getCode"> = chain.publicClient) =>
    settleAndPayCode(rpc, { address }, createLogger("silent")).state();

  it("uses the address only when it holds SettleAndPay's code", async () => {
    expect(await check(contract)).toBe("verified");
    // An account without code, and another contract (a call to either would not settle).
    expect(await check(chain.user(5).address)).toBe("wrong_code");
    expect(await check(BASE_USDC_ADDRESS)).toBe("wrong_code");
    expect(await settleAndPayCode(chain.publicClient, null, createLogger("silent")).state()).toBe(
      "not_configured",
    );
  });

  it("does not use it while the chain cannot say what is there", async () => {
    const unreachable = createPublicClient({
      transport: http(`http://127.0.0.1:${await freePort()}`, { retryCount: 0 }),
    });
    expect(await check(contract, unreachable)).toBe("unreadable");
  });
});
