import { createConfig } from "ponder";
import { parseIndexerConfig } from "./api/config/indexerConfig.ts";
import { usdcAbi } from "./contracts-abi/usdc.ts";

const settings = parseIndexerConfig();
const rpcHost = new URL(settings.rpcUrl).hostname;
// A local chain (the devnet) is rebuilt on every start: caching its blocks would be wrong.
const isLocalChain = ["127.0.0.1", "localhost", "::1", "[::1]"].includes(rpcHost);

export default createConfig({
  database: { kind: "postgres", connectionString: settings.databaseUrl, poolConfig: { max: 10 } },
  chains: {
    base: {
      id: settings.chainId,
      rpc: settings.rpcUrl,
      ...(settings.wsUrl ? { ws: settings.wsUrl } : {}),
      pollingInterval: settings.pollingIntervalMs,
      disableCache: isLocalChain,
    },
  },
  // Two entries on one address: two filters on the same event of one contract collapse.
  contracts: {
    IncomingUsdc: {
      chain: "base",
      abi: usdcAbi,
      address: settings.usdcAddress,
      startBlock: settings.startBlock,
      filter: { event: "Transfer", args: { to: settings.payTo } },
    },
    OutgoingUsdc: {
      chain: "base",
      abi: usdcAbi,
      address: settings.usdcAddress,
      startBlock: settings.startBlock,
      filter: { event: "Transfer", args: { from: settings.payoutAddress } },
    },
  },
});
