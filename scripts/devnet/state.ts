import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { DevnetAccount } from "./accounts.ts";

/**
 * `.devnet/state.json`: what a tool or a test needs to use a running devnet. Its shape is
 * kept stable on purpose (tools read it); add fields, never rename or remove one.
 */
export interface DevnetState {
  chainId: number;
  rpcUrl: string;
  usdc: string;
  payTo: string;
  payoutWallet: string;
  apiUrl: string;
  ponderUrl: string;
  databaseUrl: string;
  smtpIntake: { host: string; port: number } | null;
  /** The folder where the devnet's mail catcher stores every outgoing message as .eml. */
  mailOutbox: string | null;
  /** The address the SMTP intake takes mail for. */
  intakeAddress: string | null;
  accounts: DevnetAccount[];
}

export function devnetStatePath(devnetDirectory: string): string {
  return join(devnetDirectory, "state.json");
}

export async function writeDevnetState(devnetDirectory: string, state: DevnetState): Promise<void> {
  await mkdir(devnetDirectory, { recursive: true });
  await writeFile(devnetStatePath(devnetDirectory), `${JSON.stringify(state, null, 2)}\n`, {
    mode: 0o600,
  });
}

export async function readDevnetState(devnetDirectory = ".devnet"): Promise<DevnetState> {
  return JSON.parse(await readFile(devnetStatePath(devnetDirectory), "utf8")) as DevnetState;
}
