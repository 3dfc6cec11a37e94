import { readFileSync } from "node:fs";
import { eip3009ABI } from "@x402/evm";
import { type Abi, type AbiItem, type AbiParameter, multicall3Abi, parseAbi } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import {
  multicall3Artifact,
  settleAndPayArtifact,
  testUsdcArtifact,
} from "../../contracts-abi/artifacts.ts";
import {
  type Artifact,
  artifactUrl,
  compileContracts,
  contractNames,
  formatArtifact,
} from "../../contracts-abi/build.ts";
import { settleAndPayAbi } from "../../contracts-abi/settleAndPay.ts";
import { usdcAbi } from "../../contracts-abi/usdc.ts";

describe("committed contract artifacts", () => {
  let compiled: Record<string, Artifact>;

  // One compile for every case: solc's WebAssembly build takes a few seconds.
  beforeAll(() => {
    compiled = compileContracts();
  }, 60_000);

  it.each(contractNames)(
    "%s.json is what its .sol compiles to (else: npm run contracts:build)",
    (name) => {
      const artifact = compiled[name];
      if (!artifact) throw new Error(`${name} was not compiled`);
      expect(artifact.deployedBytecode).toMatch(/^0x[0-9a-f]{100,}$/);
      expect(readFileSync(artifactUrl(name), "utf8")).toBe(formatArtifact(artifact));
    },
  );
});

/** What decides the calldata and the decoding: name, parameter types, return types, indexing. */
function shape(item: AbiItem): string {
  const types = (parameters: readonly AbiParameter[]): string =>
    parameters
      .map((parameter) => {
        const components = "components" in parameter ? `(${types(parameter.components)})` : "";
        const indexed = "indexed" in parameter && parameter.indexed ? " indexed" : "";
        return `${components}${parameter.type}${indexed}`;
      })
      .join(",");
  if (item.type === "function") {
    return `function ${item.name}(${types(item.inputs)}) returns (${types(item.outputs)})`;
  }
  if (item.type === "event") return `event ${item.name}(${types(item.inputs)})`;
  return item.type;
}

const shapes = (abi: Abi) => abi.map(shape);

// The well-known Multicall3 interface (mds1/multicall, deployed at 0xcA11bde0...).
const canonicalMulticall3Abi = parseAbi([
  "struct Call { address target; bytes callData; }",
  "struct Call3 { address target; bool allowFailure; bytes callData; }",
  "struct Call3Value { address target; bool allowFailure; uint256 value; bytes callData; }",
  "struct Result { bool success; bytes returnData; }",
  "function aggregate(Call[] calls) payable returns (uint256 blockNumber, bytes[] returnData)",
  "function aggregate3(Call3[] calls) payable returns (Result[] returnData)",
  "function aggregate3Value(Call3Value[] calls) payable returns (Result[] returnData)",
  "function blockAndAggregate(Call[] calls) payable returns (uint256 blockNumber, bytes32 blockHash, Result[] returnData)",
  "function getBasefee() view returns (uint256 basefee)",
  "function getBlockHash(uint256 blockNumber) view returns (bytes32 blockHash)",
  "function getBlockNumber() view returns (uint256 blockNumber)",
  "function getChainId() view returns (uint256 chainid)",
  "function getCurrentBlockCoinbase() view returns (address coinbase)",
  "function getCurrentBlockDifficulty() view returns (uint256 difficulty)",
  "function getCurrentBlockGasLimit() view returns (uint256 gaslimit)",
  "function getCurrentBlockTimestamp() view returns (uint256 timestamp)",
  "function getEthBalance(address addr) view returns (uint256 balance)",
  "function getLastBlockHash() view returns (bytes32 blockHash)",
  "function tryAggregate(bool requireSuccess, Call[] calls) payable returns (Result[] returnData)",
  "function tryBlockAndAggregate(bool requireSuccess, Call[] calls) payable returns (uint256 blockNumber, bytes32 blockHash, Result[] returnData)",
]);

describe("contract interfaces match what clients call", () => {
  it("TestUSDC has every entry of usdcAbi and of @x402/evm's eip3009ABI", () => {
    const token = shapes(testUsdcArtifact.abi);
    for (const expected of [...shapes(usdcAbi), ...shapes(eip3009ABI)]) {
      expect(token).toContain(expected);
    }
  });

  it("DevnetMulticall3 has exactly the Multicall3 interface, which covers viem's multicall3Abi", () => {
    expect(shapes(multicall3Artifact.abi).sort()).toEqual(shapes(canonicalMulticall3Abi).sort());
    for (const expected of shapes(multicall3Abi)) {
      expect(shapes(multicall3Artifact.abi)).toContain(expected);
    }
  });

  it("SettleAndPay has exactly the interface the payout signer encodes (settleAndPayAbi)", () => {
    expect(shapes(settleAndPayArtifact.abi)).toEqual(shapes(settleAndPayAbi as unknown as Abi));
  });
});
