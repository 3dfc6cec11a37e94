import { BASE_USDC_ADDRESS } from "../../contracts-abi/usdc.ts";
import { accountWithRole, type DevnetAccount } from "./accounts.ts";
import { devnetSettleAndPayAddress } from "./settleAndPay.ts";

/**
 * The settings that point the service and the indexer at a devnet: its RPC, a database, and
 * the devnet accounts in their roles. `npm start`, the benchmarks and the tests all use it.
 */
export function devnetServiceEnv(
  accounts: DevnetAccount[],
  where: { rpcUrl: string; databaseUrl: string },
): Record<string, string> {
  return {
    RPC_URL: where.rpcUrl,
    CHAIN_ID: "8453",
    USDC_ADDRESS: BASE_USDC_ADDRESS,
    DATABASE_URL: where.databaseUrl,
    PAY_TO: accountWithRole(accounts, "pay_to").address,
    PAYOUT_ADDRESS: accountWithRole(accounts, "payout").address,
    PAYOUT_PRIVATE_KEY: accountWithRole(accounts, "payout").privateKey,
    RECEIPT_SIGNER_PRIVATE_KEY: accountWithRole(accounts, "receipt_signer").privateKey,
    FACILITATOR_PRIVATE_KEY: accountWithRole(accounts, "facilitator").privateKey,
    SETTLE_AND_PAY_ADDRESS: devnetSettleAndPayAddress(accounts),
    START_BLOCK: "0",
    // Every client of a devnet is this machine (the browser, the benchmarks' load generators,
    // the tests' floods): one address, uncapped. A public deployment keeps the cap.
    HTTP_CONNECTIONS_PER_IP: "0",
    INDEXER_POLLING_INTERVAL_MS: "250",
    // A devnet's webhook receivers run on this machine (docs/events.md#no-ssrf).
    WEBHOOK_ALLOW_LOOPBACK: "true",
    // Anvil answers WebSocket on its HTTP port. Polling, Ponder fetched the latest block with
    // all its transactions every 250 ms: in a burst of 10,000 payments that kept Anvil on both
    // cores for six minutes (BENCHMARKS.md#payouts).
    INDEXER_WS_URL: webSocketUrlOf(where.rpcUrl),
  };
}

/** The same node's WebSocket endpoint: ws:// for http://, wss:// for https://. */
export function webSocketUrlOf(rpcUrl: string): string {
  const url = new URL(rpcUrl);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  return url.toString();
}
