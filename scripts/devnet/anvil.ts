import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { waitForExit } from "./processes.ts";
import { recordProcess } from "./processRecords.ts";

export interface AnvilOptions {
  /** 0 picks a free port; the real one is read back from Anvil's own output. */
  port: number;
  chainId: number;
  /** Seconds between blocks; undefined mines one block per transaction (automine). */
  blockTimeSeconds?: number | undefined;
  /** Fork this RPC instead of starting an empty chain. */
  forkUrl?: string | undefined;
  accounts?: number;
  host?: string;
  /** Block gas limit; Anvil's default (30M) holds ~600 USDC transfers. */
  gasLimit?: bigint;
  /** Keep Anvil's output (a line per RPC method called, a few per transaction mined) here. */
  logFile?: string | undefined;
}

export interface RunningAnvil {
  rpcUrl: string;
  port: number;
  process: ChildProcess;
  stop(): Promise<void>;
}

const platformPackages: Record<string, string> = {
  "linux-x64": "@foundry-rs/anvil-linux-amd64",
  "linux-arm64": "@foundry-rs/anvil-linux-arm64",
  "darwin-x64": "@foundry-rs/anvil-darwin-amd64",
  "darwin-arm64": "@foundry-rs/anvil-darwin-arm64",
};

/**
 * The native binary, not the package's `anvil` wrapper: the wrapper is a Node process
 * in between that only forwards SIGINT and SIGTERM, so a SIGKILL of it orphans Anvil.
 */
export function anvilBinaryPath(): string {
  const require = createRequire(import.meta.url);
  const platformPackage = platformPackages[`${process.platform}-${process.arch}`];
  if (!platformPackage) {
    throw new Error(`Anvil has no npm binary for ${process.platform}-${process.arch}`);
  }
  return join(dirname(require.resolve(`${platformPackage}/package.json`)), "bin", "anvil");
}

export async function startAnvil(options: AnvilOptions): Promise<RunningAnvil> {
  const host = options.host ?? "127.0.0.1";
  const args = [
    "--host",
    host,
    "--port",
    String(options.port),
    "--chain-id",
    String(options.chainId),
    "--accounts",
    String(options.accounts ?? 12),
    "--balance",
    "10000",
  ];
  if (options.blockTimeSeconds !== undefined) {
    args.push("--block-time", String(options.blockTimeSeconds));
  }
  if (options.forkUrl) args.push("--fork-url", options.forkUrl);
  if (options.gasLimit) args.push("--gas-limit", String(options.gasLimit));

  const child = spawn(anvilBinaryPath(), args, {
    stdio: ["ignore", "pipe", "pipe"],
    // Its own process group: a Ctrl-C reaches the launcher, which stops children in order.
    detached: true,
  });
  recordProcess(child, "anvil");
  const port = await new Promise<number>((resolve, reject) => {
    let output = "";
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8");
      const listening = /Listening on [^\s:]+:(\d+)/.exec(output);
      if (listening?.[1]) {
        child.stdout?.off("data", onData);
        child.stderr?.off("data", onData);
        // Keep draining so a chatty Anvil never blocks on a full pipe.
        if (options.logFile) child.stdout?.pipe(createWriteStream(options.logFile));
        else child.stdout?.resume();
        child.stderr?.resume();
        resolve(Number(listening[1]));
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.once("error", reject);
    child.once("exit", (code) => {
      const reason = /address already in use/i.test(output)
        ? `port ${options.port} is already in use`
        : `exited with code ${code}: ${output.trim().split("\n").slice(-3).join(" ")}`;
      reject(new Error(`Anvil did not start: ${reason}`));
    });
  });

  return {
    rpcUrl: `http://${host}:${port}`,
    port,
    process: child,
    stop: () => waitForExit(child, "SIGTERM"),
  };
}
