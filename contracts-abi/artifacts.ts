/**
 * The compiled devnet contracts (see build.ts) and the one step that puts them on an Anvil
 * chain: their runtime code at the addresses the real Base contracts live at, so clients,
 * x402 and the indexer use the same addresses on the devnet as on Base.
 */
import type { Abi, Address, Client, Hex } from "viem";
import multicall3Json from "./DevnetMulticall3.json" with { type: "json" };
import settleAndPayJson from "./SettleAndPay.json" with { type: "json" };
import testUsdcJson from "./TestUSDC.json" with { type: "json" };
import { BASE_USDC_ADDRESS, MULTICALL3_ADDRESS } from "./usdc.ts";

export interface ContractArtifact {
  abi: Abi;
  bytecode: Hex;
  deployedBytecode: Hex;
}

export const testUsdcArtifact: ContractArtifact = {
  abi: testUsdcJson.abi as Abi,
  bytecode: testUsdcJson.bytecode as Hex,
  deployedBytecode: testUsdcJson.deployedBytecode as Hex,
};

export const multicall3Artifact: ContractArtifact = {
  abi: multicall3Json.abi as Abi,
  bytecode: multicall3Json.bytecode as Hex,
  deployedBytecode: multicall3Json.deployedBytecode as Hex,
};

/** Deployed with a transaction (the constructor is empty), on the devnet and on Base alike. */
export const settleAndPayArtifact: ContractArtifact = {
  abi: settleAndPayJson.abi as Abi,
  bytecode: settleAndPayJson.bytecode as Hex,
  deployedBytecode: settleAndPayJson.deployedBytecode as Hex,
};

type AnvilSetCode = { Parameters: [Address, Hex]; ReturnType: null };

/** Needs an Anvil node: `anvil_setCode` replaces whatever code was at those addresses. */
export async function placeDevnetContracts(client: Pick<Client, "request">): Promise<void> {
  for (const [address, code] of [
    [BASE_USDC_ADDRESS, testUsdcArtifact.deployedBytecode],
    [MULTICALL3_ADDRESS, multicall3Artifact.deployedBytecode],
  ] as const) {
    await client.request<AnvilSetCode>({ method: "anvil_setCode", params: [address, code] });
  }
}
