import {
  createTestClient,
  createWalletClient,
  encodeAbiParameters,
  type Hex,
  http,
  keccak256,
  numberToHex,
  type PublicClient,
  publicActions,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { placeDevnetContracts, testUsdcArtifact } from "../../contracts-abi/artifacts.ts";
import { BASE_USDC_ADDRESS } from "../../contracts-abi/usdc.ts";
import { accountWithRole, type DevnetAccount, type DevnetRole } from "./accounts.ts";
import { setUpDevnetSettleAndPay } from "./settleAndPay.ts";

const USDC = 10n ** 6n;
export const DEVNET_ETH_BALANCE = 10n * 10n ** 18n;

/** What each role starts with on the devnet, in atomic USDC. */
export const DEVNET_USDC_BALANCES: Record<DevnetRole, bigint> = {
  deployer: 0n,
  pay_to: 0n,
  payout: 10_000n * USDC,
  receipt_signer: 0n,
  facilitator: 0n,
  user: 1_000n * USDC,
};

/**
 * Makes a fresh Anvil look like Base for the service: USDC and Multicall3 at their canonical
 * addresses, every devnet account with ETH for gas and its starting USDC, and SettleAndPay
 * deployed with the payout wallet's allowance (docs/payments.md#one-transaction-settlement).
 * On a fork, real USDC is already there: balances are written into its storage instead.
 */
export async function prepareDevnetChain(
  rpcUrl: string,
  accounts: DevnetAccount[],
  options: { forked: boolean },
): Promise<void> {
  const testClient = createTestClient({ mode: "anvil", transport: http(rpcUrl) }).extend(
    publicActions,
  );
  for (const account of accounts) {
    await testClient.setBalance({ address: account.address, value: DEVNET_ETH_BALANCE });
  }
  const funded = accounts.filter((account) => DEVNET_USDC_BALANCES[account.role] > 0n);

  const deployer = accountWithRole(accounts, "deployer");
  const wallet = createWalletClient({
    account: privateKeyToAccount(deployer.privateKey),
    transport: http(rpcUrl),
  });
  const chainId = await testClient.getChainId();
  if (options.forked) {
    for (const account of funded) {
      await testClient.setStorageAt({
        address: BASE_USDC_ADDRESS,
        index: fiatTokenBalanceSlot(account.address),
        value: numberToHex(DEVNET_USDC_BALANCES[account.role], { size: 32 }),
      });
    }
    const { hashes } = await setUpDevnetSettleAndPay(testClient, wallet, accounts, {
      forked: true,
      deployerNonce: await testClient.getTransactionCount({ address: deployer.address }),
      chainId,
    });
    await mineAndCheck(testClient, hashes);
    return;
  }

  await placeDevnetContracts(testClient);
  const settleAndPay = await setUpDevnetSettleAndPay(testClient, wallet, accounts, {
    forked: false,
    deployerNonce: await testClient.getTransactionCount({ address: deployer.address }),
    chainId,
  });
  let nonce = settleAndPay.nextDeployerNonce;
  const hashes: Hex[] = [...settleAndPay.hashes];
  for (const account of funded) {
    hashes.push(
      await wallet.writeContract({
        chain: null,
        address: BASE_USDC_ADDRESS,
        abi: testUsdcArtifact.abi,
        functionName: "mint",
        args: [account.address, DEVNET_USDC_BALANCES[account.role]],
        nonce: nonce++,
        gas: 100_000n,
      }),
    );
  }
  await mineAndCheck(testClient, hashes);
}

async function mineAndCheck(
  testClient: { mine(args: { blocks: number }): Promise<void> } & Pick<
    PublicClient,
    "waitForTransactionReceipt"
  >,
  hashes: Hex[],
): Promise<void> {
  // Mine now rather than wait for the next interval block: start-up should not take a block time.
  await testClient.mine({ blocks: 1 });
  for (const hash of hashes) {
    const receipt = await testClient.waitForTransactionReceipt({ hash, pollingInterval: 50 });
    if (receipt.status !== "success") throw new Error(`Preparing the devnet failed in ${hash}`);
  }
}

/**
 * FiatTokenV2_2 keeps balances in the mapping at storage slot 9 (the top bit of each value
 * is the blacklist flag, left clear here). Used only on a fork of real Base.
 */
function fiatTokenBalanceSlot(holder: Hex): Hex {
  return keccak256(encodeAbiParameters([{ type: "address" }, { type: "uint256" }], [holder, 9n]));
}
