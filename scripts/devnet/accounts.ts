import { bytesToHex, type Hex } from "viem";
import { mnemonicToAccount } from "viem/accounts";

/** Anvil's own default mnemonic: the devnet's keys are public by design. Never fund them on Base. */
export const DEVNET_MNEMONIC = "test test test test test test test test test test test junk";

export type DevnetRole =
  | "deployer"
  | "pay_to"
  | "payout"
  | "receipt_signer"
  | "facilitator"
  | "user";

export interface DevnetAccount {
  address: Hex;
  privateKey: Hex;
  role: DevnetRole;
}

const SERVICE_ROLES: DevnetRole[] = [
  "deployer",
  "pay_to",
  "payout",
  "receipt_signer",
  "facilitator",
];
export const DEVNET_USER_COUNT = 7;
export const DEVNET_ACCOUNT_COUNT = SERVICE_ROLES.length + DEVNET_USER_COUNT;

/** The devnet's accounts by HD index: the service roles first, then the users. */
export function devnetAccounts(): DevnetAccount[] {
  return Array.from({ length: DEVNET_ACCOUNT_COUNT }, (_, addressIndex) => {
    const account = mnemonicToAccount(DEVNET_MNEMONIC, { addressIndex });
    const privateKey = account.getHdKey().privateKey;
    if (!privateKey) throw new Error(`No private key for devnet account ${addressIndex}`);
    return {
      address: account.address,
      privateKey: bytesToHex(privateKey),
      role: SERVICE_ROLES[addressIndex] ?? "user",
    };
  });
}

export function accountWithRole(accounts: DevnetAccount[], role: DevnetRole): DevnetAccount {
  const account = accounts.find((candidate) => candidate.role === role);
  if (!account) throw new Error(`No devnet account has the role ${role}`);
  return account;
}
