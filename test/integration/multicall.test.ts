import {
  createPublicClient,
  createTestClient,
  createWalletClient,
  decodeErrorResult,
  decodeFunctionResult,
  encodeFunctionData,
  type Hex,
  http,
} from "viem";
import { mnemonicToAccount } from "viem/accounts";
import { base } from "viem/chains";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  multicall3Artifact,
  placeDevnetContracts,
  testUsdcArtifact,
} from "../../contracts-abi/artifacts.ts";
import { BASE_USDC_ADDRESS, MULTICALL3_ADDRESS, usdcAbi } from "../../contracts-abi/usdc.ts";
import { type RunningAnvil, startAnvil } from "../../scripts/devnet/anvil.ts";

const ANVIL_MNEMONIC = "test test test test test test test test test test test junk";
const alice = mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex: 0 });
const bob = mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex: 1 });
const MINTED = 7_000_000n;

interface Result {
  success: boolean;
  returnData: Hex;
}

let anvil: RunningAnvil;
let publicClient: ReturnType<typeof connect>["publicClient"];

function connect(rpcUrl: string) {
  const transport = http(rpcUrl);
  return {
    publicClient: createPublicClient({ chain: base, transport, pollingInterval: 50 }),
    testClient: createTestClient({ mode: "anvil", chain: base, transport }),
    wallet: createWalletClient({ account: alice, chain: base, transport }),
  };
}

beforeAll(async () => {
  anvil = await startAnvil({ port: 0, chainId: base.id });
  const clients = connect(anvil.rpcUrl);
  publicClient = clients.publicClient;
  await placeDevnetContracts(clients.testClient);
  const hash = await clients.wallet.writeContract({
    address: BASE_USDC_ADDRESS,
    abi: testUsdcArtifact.abi,
    functionName: "mint",
    args: [alice.address, MINTED],
  });
  await publicClient.waitForTransactionReceipt({ hash });
});

afterAll(async () => {
  await anvil?.stop();
});

const token = { address: BASE_USDC_ADDRESS, abi: usdcAbi } as const;
const balanceOfAlice = {
  target: BASE_USDC_ADDRESS,
  callData: encodeFunctionData({ abi: usdcAbi, functionName: "balanceOf", args: [alice.address] }),
};
// The multicall contract holds no USDC, so a transfer from it reverts inside the batch.
const transferFromMulticall = {
  target: BASE_USDC_ADDRESS,
  callData: encodeFunctionData({ abi: usdcAbi, functionName: "transfer", args: [bob.address, 1n] }),
};

function callMulticall(functionName: string, args: readonly unknown[]): Promise<unknown> {
  return publicClient.readContract({
    address: MULTICALL3_ADDRESS,
    abi: multicall3Artifact.abi,
    functionName,
    args,
  });
}

const revertReason = (data: Hex) => decodeErrorResult({ abi: [], data }).args[0];

describe("DevnetMulticall3 at the canonical Multicall3 address", () => {
  it("serves viem's multicall (aggregate3) for the token", async () => {
    const results = await publicClient.multicall({
      contracts: [
        { ...token, functionName: "balanceOf", args: [alice.address] },
        { ...token, functionName: "name" },
        { ...token, functionName: "decimals" },
      ],
    });
    expect(results).toEqual([
      { status: "success", result: MINTED },
      { status: "success", result: "USD Coin" },
      { status: "success", result: 6 },
    ]);
  });

  it("tryAggregate(false, ...) returns a failure entry for a reverting call, as @x402/evm reads it", async () => {
    const results = (await callMulticall("tryAggregate", [
      false,
      [balanceOfAlice, transferFromMulticall],
    ])) as Result[];

    expect(results).toHaveLength(2);
    expect(results[0]?.success).toBe(true);
    expect(
      decodeFunctionResult({
        abi: usdcAbi,
        functionName: "balanceOf",
        data: results[0]?.returnData ?? "0x",
      }),
    ).toBe(MINTED);
    expect(results[1]?.success).toBe(false);
    expect(revertReason(results[1]?.returnData ?? "0x")).toBe(
      "ERC20: transfer amount exceeds balance",
    );
  });

  it("reverts the whole batch when a call that must succeed fails", async () => {
    await expect(
      callMulticall("tryAggregate", [true, [balanceOfAlice, transferFromMulticall]]),
    ).rejects.toThrow("Multicall3: call failed");
    await expect(
      callMulticall("aggregate", [[balanceOfAlice, transferFromMulticall]]),
    ).rejects.toThrow("Multicall3: call failed");
    await expect(
      callMulticall("aggregate3", [[{ ...transferFromMulticall, allowFailure: false }]]),
    ).rejects.toThrow("Multicall3: call failed");
  });

  it("aggregate3Value forwards values that add up to msg.value", async () => {
    const pay = { target: bob.address, allowFailure: false, value: 5n, callData: "0x" } as const;
    const { result } = await publicClient.simulateContract({
      account: alice,
      address: MULTICALL3_ADDRESS,
      abi: multicall3Artifact.abi,
      functionName: "aggregate3Value",
      args: [[pay, pay]],
      value: 10n,
    });
    expect(result).toEqual([
      { success: true, returnData: "0x" },
      { success: true, returnData: "0x" },
    ]);
    await expect(
      publicClient.simulateContract({
        account: alice,
        address: MULTICALL3_ADDRESS,
        abi: multicall3Artifact.abi,
        functionName: "aggregate3Value",
        args: [[pay]],
        value: 10n,
      }),
    ).rejects.toThrow("Multicall3: value mismatch");
  });

  it("answers the block and chain getters", async () => {
    const block = await publicClient.getBlock();
    expect(await callMulticall("getChainId", [])).toBe(8453n);
    expect(await callMulticall("getBlockNumber", [])).toBe(block.number);
    // eth_call runs in the latest block, whose own hash the EVM cannot see yet.
    expect(await callMulticall("getBlockHash", [block.number - 1n])).toBe(block.parentHash);
    expect(await callMulticall("getLastBlockHash", [])).toBe(block.parentHash);
    expect(await callMulticall("getCurrentBlockTimestamp", [])).toBe(block.timestamp);
    expect(await callMulticall("getCurrentBlockGasLimit", [])).toBe(block.gasLimit);
    expect(await callMulticall("getEthBalance", [alice.address])).toBe(
      await publicClient.getBalance({ address: alice.address }),
    );
  });
});
