import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPublicClient, http } from "viem";
import { afterEach, describe, expect, it } from "vitest";
import { BASE_USDC_ADDRESS, usdcAbi } from "../../contracts-abi/usdc.ts";
import { recordProcess } from "../../scripts/devnet/processRecords.ts";
import { commandOf, descendantsOf, processStartTime } from "../../scripts/devnet/processTree.ts";
import type { DevnetState } from "../../scripts/devnet/state.ts";
import { childEnvironment } from "../support/childEnvironment.ts";
import { sendToIntake } from "../support/mail.ts";
import { freePort } from "../support/ports.ts";
import { waitFor } from "../support/waitFor.ts";

/** `npm start` as a real child process, on free ports and in a devnet folder of its own. */

const repositoryRoot = join(import.meta.dirname, "..", "..");
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Launch {
  process: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
  devnetDirectory: string;
}

async function launch(
  env: Record<string, string> = {},
  prepare?: (devnetDirectory: string) => Promise<void>,
): Promise<Launch> {
  // A test that starts twice in one folder names it (and removes it).
  const devnetDirectory = env.DEVNET_DIR ?? (await mkdtemp(join(tmpdir(), "devnet-")));
  if (!env.DEVNET_DIR) {
    // As root, PostgreSQL runs as `postgres`, which must be able to enter this folder.
    await chmod(devnetDirectory, 0o755);
    cleanups.push(() => rm(devnetDirectory, { recursive: true, force: true }));
  }
  await prepare?.(devnetDirectory);
  const child = spawn(process.execPath, [join(repositoryRoot, "scripts", "start.ts")], {
    cwd: repositoryRoot,
    env: {
      ...childEnvironment(),
      DEVNET_DIR: devnetDirectory,
      ANVIL_PORT: String(await freePort()),
      EMBEDDED_POSTGRES_PORT: String(await freePort()),
      PONDER_PORT: String(await freePort()),
      PORT: String(await freePort()),
      SMTP_INTAKE_PORT: String(await freePort()),
      BLOCK_TIME: "1",
      LOG_LEVEL: "warn",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  recordProcess(child, "npm start");
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  cleanups.push(async () => {
    if (child.exitCode !== null) return;
    // Its children too: they run in process groups of their own, and their records go with
    // the devnet folder this test removes.
    for (const pid of [child.pid as number, ...descendantsOf(child.pid as number)]) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {}
    }
  });
  return { process: child, output: () => output, exited, devnetDirectory };
}

/** Still running: not ended, and not a zombie waiting for its parent. */
const isAlive = (pid: number) => processStartTime(pid) !== undefined;

async function untilRunning(started: Launch): Promise<DevnetState> {
  await waitFor(() => started.output().includes("Ctrl-C stops everything"), {
    timeoutMs: 100_000,
    what: `the launcher to report it is running. Output so far:\n${started.output()}`,
  });
  return JSON.parse(
    readFileSync(join(started.devnetDirectory, "state.json"), "utf8"),
  ) as DevnetState;
}

describe("npm start (no configuration: the devnet)", () => {
  // A whole devnet start (Anvil, PostgreSQL, Ponder, the service) while other test files load
  // the same 2 cores: allow it time.
  it("runs the devnet, writes state.json, and SIGTERM leaves no process behind", {
    timeout: 150_000,
  }, async () => {
    const started = await launch();
    const state = await untilRunning(started);

    expect(Object.keys(state).sort()).toEqual(
      [
        "accounts",
        "apiUrl",
        "chainId",
        "databaseUrl",
        "intakeAddress",
        "mailOutbox",
        "payTo",
        "payoutWallet",
        "ponderUrl",
        "rpcUrl",
        "smtpIntake",
        "usdc",
      ].sort(),
    );
    expect(state.chainId).toBe(8453);
    expect(state.usdc).toBe(BASE_USDC_ADDRESS);
    const roles = state.accounts.map((account) => account.role);
    for (const role of ["deployer", "pay_to", "payout", "receipt_signer", "facilitator"]) {
      expect(roles).toContain(role);
    }
    const users = state.accounts.filter((account) => account.role === "user");
    expect(users.length).toBeGreaterThanOrEqual(5);

    const client = createPublicClient({ transport: http(state.rpcUrl) });
    expect(await client.getChainId()).toBe(8453);
    for (const user of users) {
      expect(await client.getBalance({ address: user.address })).toBe(10n * 10n ** 18n);
      expect(
        await client.readContract({
          address: BASE_USDC_ADDRESS,
          abi: usdcAbi,
          functionName: "balanceOf",
          args: [user.address],
        }),
      ).toBe(1_000_000_000n);
    }

    const health = await fetch(`${state.apiUrl}/api/health`);
    expect(health.status).toBe(200);
    expect(await fetch(`${state.ponderUrl}/ready`).then((response) => response.status)).toBe(200);

    // The mail parts: the SMTP intake takes a mail, the answer lands as .eml in mailOutbox.
    expect(state.smtpIntake).toEqual({ host: "127.0.0.1", port: expect.any(Number) });
    expect(state.mailOutbox).toBe(join(started.devnetDirectory, "mail"));
    expect(state.intakeAddress).toBe("earn@pay-and-earn.localhost");
    await sendToIntake(state.smtpIntake?.port ?? 0, {
      from: "someone@devnet.test",
      to: state.intakeAddress as string,
      subject: "earn",
      text: "0x976EA74026E726554dB657fA54763abd0C3a0aa9",
    });
    const answer = await waitFor(
      () => {
        const [file] = existsSync(state.mailOutbox as string)
          ? readdirSync(state.mailOutbox as string).filter((name) => name.endsWith(".eml"))
          : [];
        return file && readFileSync(join(state.mailOutbox as string, file), "utf8");
      },
      { what: "the answer's .eml in the devnet's mail folder" },
    );
    expect(answer).toMatch(/^Subject: Re: earn/m);
    expect(answer).toMatch(/^To: someone@devnet\.test/m);

    const pid = started.process.pid as number;
    const children = descendantsOf(pid);
    const commands = children.map(commandOf).join("\n");
    expect(commands).toMatch(/anvil/);
    expect(commands).toMatch(/bin\/postgres/);
    expect(commands).toMatch(/ponder\.js start/);
    expect(commands).toMatch(/api\/main\.ts/);
    expect(started.output()).toContain(`Mail in     smtp://127.0.0.1:${state.smtpIntake?.port}`);

    started.process.kill("SIGTERM");
    expect(await started.exited).toBe(0);
    expect(children.filter(isAlive)).toEqual([]);
  });

  it("stops in order on a double Ctrl-C (the terminal and npm both send SIGINT)", {
    timeout: 150_000,
  }, async () => {
    const started = await launch();
    await untilRunning(started);
    const children = descendantsOf(started.process.pid as number);
    expect(children.length).toBeGreaterThanOrEqual(4);

    started.process.kill("SIGINT");
    started.process.kill("SIGINT");
    expect(await started.exited).toBe(0);
    expect(children.filter(isAlive)).toEqual([]);
    expect(started.output()).not.toMatch(/unexpectedly/);
  });

  it("a start after a launcher that was SIGKILLed stops what that one left, on the same ports", {
    timeout: 300_000,
  }, async () => {
    const devnetDirectory = await mkdtemp(join(tmpdir(), "devnet-"));
    await chmod(devnetDirectory, 0o755);
    cleanups.push(() => rm(devnetDirectory, { recursive: true, force: true }));
    const settings = {
      DEVNET_DIR: devnetDirectory,
      ANVIL_PORT: String(await freePort()),
      EMBEDDED_POSTGRES_PORT: String(await freePort()),
      PONDER_PORT: String(await freePort()),
      PORT: String(await freePort()),
      SMTP_INTAKE_PORT: String(await freePort()),
    };
    const first = await launch(settings);
    await untilRunning(first);
    const children = descendantsOf(first.process.pid as number);
    first.process.kill("SIGKILL");
    await first.exited;
    // Anvil, PostgreSQL and Ponder run in process groups of their own: they outlive it.
    expect(children.filter(isAlive).map(commandOf).join("\n")).toMatch(/anvil/);

    const second = await launch(settings);
    await untilRunning(second);
    expect(second.output()).toMatch(/Stopped what an earlier npm start left running: .*anvil/);
    expect(children.filter(isAlive)).toEqual([]);
    second.process.kill("SIGTERM");
    expect(await second.exited).toBe(0);
  });

  it("says which port is taken and starts nothing", async () => {
    const blocker: Server = createServer();
    const port = await freePort();
    await new Promise<void>((resolve) => blocker.listen(port, "127.0.0.1", resolve));
    cleanups.push(() => new Promise((resolve) => blocker.close(() => resolve())));

    const started = await launch({ ANVIL_PORT: String(port) });

    expect(await started.exited).toBe(1);
    expect(started.output()).toContain(`Port ${port} (Anvil) is already in use`);
    expect(started.output()).not.toMatch(/^\s+at /m);
    expect(descendantsOf(started.process.pid as number)).toEqual([]);
  });

  it("stops Anvil again when PostgreSQL cannot start", async () => {
    // A file where the database folder should be: initdb fails after Anvil is up.
    const started = await launch({}, (directory) =>
      writeFile(join(directory, "postgres"), "not a folder"),
    );

    expect(await started.exited).toBe(1);
    expect(started.output()).toMatch(/Start-up failed: .*/);
    expect(started.output()).toContain("Stopping Anvil");
    expect(started.output()).not.toMatch(/^\s+at /m);
  });
});

describe("npm start (configured)", () => {
  it("refuses a broken setting with one line per problem and exit code 1", async () => {
    const started = await launch({
      RPC_URL: "http://127.0.0.1:9",
      START_BLOCK: "0",
      DATABASE_URL: "postgres://postgres@127.0.0.1:9/none",
      PAY_TO: "nope",
      PAYOUT_PRIVATE_KEY: "0x1234",
      RECEIPT_SIGNER_PRIVATE_KEY: `0x${"22".repeat(32)}`,
    });

    expect(await started.exited).toBe(1);
    expect(started.output()).toContain("PAY_TO is not an address");
    expect(started.output()).toContain("PAYOUT_PRIVATE_KEY is not a private key");
    expect(started.output()).not.toMatch(/^\s+at /m);
    expect(existsSync(join(started.devnetDirectory, "state.json"))).toBe(false);
  });
});
