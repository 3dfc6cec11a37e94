import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startAnvil } from "../../scripts/devnet/anvil.ts";
import { recordProcess, recordProcessesIn } from "../../scripts/devnet/processRecords.ts";
import { commandOf, descendantsOf, processStartTime } from "../../scripts/devnet/processTree.ts";
import { TEST_PROCESS_FOLDER } from "../support/testProcesses.ts";
import { waitFor } from "../support/waitFor.ts";

/**
 * An interrupted test run leaves nothing running: vitest runs a fixture file that starts two
 * Anvils (in process groups of their own, as the harness starts them) and waits; this test
 * interrupts or kills that run and looks for the Anvils afterwards.
 */

const repositoryRoot = join(import.meta.dirname, "..", "..");
const vitest = join(repositoryRoot, "node_modules", "vitest", "vitest.mjs");
const config = join(repositoryRoot, "test", "fixtures", "processes", "vitest.config.ts");

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface FixtureRun {
  process: ChildProcess;
  output(): string;
  exited: Promise<void>;
}

function runFixture(folder: string, chains: number): FixtureRun {
  const child = spawn(process.execPath, [vitest, "run", "--config", config], {
    cwd: repositoryRoot,
    env: { ...process.env, TEST_PROCESS_FOLDER: folder, FIXTURE_CHAINS: String(chains) },
    stdio: ["ignore", "pipe", "pipe"],
    // Its own process group, as a terminal's foreground job: Ctrl-C signals the whole group.
    detached: true,
  });
  recordProcess(child, "vitest (fixture)");
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      for (const pid of [child.pid as number, ...descendantsOf(child.pid as number)]) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {}
      }
    }
    await exited;
  });
  return { process: child, output: () => output, exited };
}

/** The fixture's Anvils, by pid and start time, once both run. */
async function fixtureChains(run: FixtureRun) {
  await waitFor(() => run.output().includes("FIXTURE_READY"), {
    timeoutMs: 120_000,
    what: `the fixture run to start its chains. Output so far:\n${run.output()}`,
  });
  const chains = descendantsOf(run.process.pid as number)
    .filter((pid) => /anvil/.test(commandOf(pid)))
    .map((pid) => ({ pid, startTime: processStartTime(pid) }));
  expect(chains).toHaveLength(2);
  return chains;
}

const running = (chains: { pid: number; startTime: string | undefined }[]) =>
  chains.filter((chain) => processStartTime(chain.pid) === chain.startTime);

async function newFolder(): Promise<string> {
  const folder = await mkdtemp(join(tmpdir(), "test-processes-"));
  cleanups.push(() => rm(folder, { recursive: true, force: true }));
  return folder;
}

describe("an interrupted test run", () => {
  for (const [how, signal, toGroup] of [
    ["SIGTERM to vitest", "SIGTERM", false],
    ["Ctrl-C (SIGINT to the terminal's process group)", "SIGINT", true],
  ] as const) {
    it(`stops every process it started on ${how}`, { timeout: 180_000 }, async () => {
      const run = runFixture(await newFolder(), 2);
      const chains = await fixtureChains(run);

      process.kill(toGroup ? -(run.process.pid as number) : (run.process.pid as number), signal);
      await run.exited;

      await waitFor(() => running(chains).length === 0, {
        timeoutMs: 10_000,
        what: "the interrupted run's chains to stop",
      }).catch(() => {});
      expect(running(chains)).toEqual([]);
    });
  }

  it("stops at its end what a file started whose worker is still alive", async () => {
    const folder = await newFolder();
    // Seen under load: vitest gave up terminating a fault-suite worker, ran the global teardown
    // while it lived, and exited; the worker's chains and indexers outlived the run.
    const script = join(
      repositoryRoot,
      "test",
      "fixtures",
      "processes",
      "teardownWithLiveOwner.ts",
    );
    const output = await new Promise<string>((resolve, reject) => {
      const child = spawn(process.execPath, [script], {
        cwd: repositoryRoot,
        env: { ...process.env, TEST_PROCESS_FOLDER: folder },
        stdio: ["ignore", "pipe", "inherit"],
      });
      let text = "";
      child.stdout?.on("data", (chunk: Buffer) => {
        text += chunk.toString();
      });
      child.once("error", reject);
      child.once("exit", () => resolve(text));
    });
    expect(output).toContain("OUTLIVED false");
  });

  it("is cleaned up by the next run when it was killed outright, and only it", {
    timeout: 180_000,
  }, async () => {
    const folder = await newFolder();
    // A chain recorded in the same folder by a starter that still runs (this test): not a
    // leftover, so the next run must leave it alone.
    const kept = await startAnvil({ port: 0, chainId: 8453 });
    cleanups.push(() => kept.stop());
    recordProcessesIn(folder);
    recordProcess(kept.process, "anvil (kept)");
    recordProcessesIn(TEST_PROCESS_FOLDER);

    const killed = runFixture(folder, 2);
    const chains = await fixtureChains(killed);
    // SIGKILL to vitest and its workers: no handler runs, the chains are orphaned.
    for (const pid of [
      killed.process.pid as number,
      ...descendantsOf(killed.process.pid as number),
    ]) {
      if (!/anvil/.test(commandOf(pid))) process.kill(pid, "SIGKILL");
    }
    await killed.exited;
    expect(running(chains)).toHaveLength(2);

    const next = runFixture(folder, 0);
    await next.exited;
    expect(next.output()).toMatch(/Stopped 2 process\(es\) an earlier, interrupted test run left/);
    expect(running(chains)).toEqual([]);
    expect(kept.process.exitCode).toBeNull();
    expect(kept.process.signalCode).toBeNull();
  });
});
