/**
 * Compiles the devnet contracts with the npm `solc` (WebAssembly, offline) and writes one
 * JSON artifact per contract next to its source. Run with `npm run contracts:build`.
 * The metadata hash is off so the same source always gives byte-identical output, which
 * test/unit/contractArtifacts.test.ts relies on to catch a .sol edited without a rebuild.
 */
import { readFileSync, writeFileSync } from "node:fs";
import solc from "solc";

export interface Artifact {
  contractName: string;
  compiler: string;
  abi: unknown[];
  bytecode: `0x${string}`;
  deployedBytecode: `0x${string}`;
}

export const contractNames = ["TestUSDC", "DevnetMulticall3", "SettleAndPay"] as const;

interface SolcOutput {
  errors?: { severity: "error" | "warning" | "info"; formattedMessage: string }[];
  contracts?: Record<
    string,
    Record<
      string,
      {
        abi: unknown[];
        evm: { bytecode: { object: string }; deployedBytecode: { object: string } };
      }
    >
  >;
}

const sourceUrl = (contractName: string) => new URL(`./${contractName}.sol`, import.meta.url);

export const artifactUrl = (contractName: string) =>
  new URL(`./${contractName}.json`, import.meta.url);

export function compileContracts(): Record<string, Artifact> {
  const sources = Object.fromEntries(
    contractNames.map((name) => [
      `${name}.sol`,
      { content: readFileSync(sourceUrl(name), "utf8") },
    ]),
  );
  const input = {
    language: "Solidity",
    sources,
    settings: {
      optimizer: { enabled: true, runs: 200 },
      evmVersion: "cancun",
      metadata: { bytecodeHash: "none", appendCBOR: false },
      outputSelection: {
        "*": { "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"] },
      },
    },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input))) as SolcOutput;

  // Warnings fail the build too: a devnet token that compiles with warnings is not worth keeping.
  const problems = (output.errors ?? []).filter((error) => error.severity !== "info");
  if (problems.length > 0) {
    throw new Error(
      `solc reported problems:\n${problems.map((p) => p.formattedMessage).join("\n")}`,
    );
  }

  const compiler = solc.version() as string;
  const artifacts: Record<string, Artifact> = {};
  for (const name of contractNames) {
    const contract = output.contracts?.[`${name}.sol`]?.[name];
    if (!contract) throw new Error(`solc produced no output for ${name}`);
    artifacts[name] = {
      contractName: name,
      compiler,
      abi: contract.abi,
      bytecode: `0x${contract.evm.bytecode.object}`,
      deployedBytecode: `0x${contract.evm.deployedBytecode.object}`,
    };
  }
  return artifacts;
}

export const formatArtifact = (artifact: Artifact) => `${JSON.stringify(artifact, null, 2)}\n`;

if (import.meta.main) {
  for (const [name, artifact] of Object.entries(compileContracts())) {
    writeFileSync(artifactUrl(name), formatArtifact(artifact));
    console.log(
      `wrote contracts-abi/${name}.json (${(artifact.deployedBytecode.length - 2) / 2} bytes of runtime code)`,
    );
  }
}
