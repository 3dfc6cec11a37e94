import type { RunningPonder } from "../../../scripts/devnet/ponder.ts";
import type { TestChain } from "../chain.ts";
import { startTestIndexer } from "../indexer.ts";

/**
 * Ponder under a supervisor of the suite's own: restarted on the same schema (it resumes), or
 * started on a new build schema (it re-indexes from the start block and moves the `chain`
 * views over once ready), and brought back if it dies by itself (a database restart can end
 * it), which is counted.
 */
export function createSupervisedIndexer(chain: TestChain, databaseUrl: string) {
  let current: RunningPonder | undefined;
  let build = 0;
  let intended = false;
  let diedByItself = 0;
  let restarting: Promise<void> | undefined;
  const schema = () => `indexer_faults_${build}`;

  async function start(): Promise<void> {
    const started = await startTestIndexer(chain, databaseUrl, { schema: schema() });
    current = started;
    started.process.once("exit", () => {
      if (intended || current !== started) return;
      diedByItself += 1;
      current = undefined;
      restarting = start().finally(() => {
        restarting = undefined;
      });
    });
  }

  async function stopCurrent(): Promise<void> {
    await restarting?.catch(() => {});
    intended = true;
    try {
      await current?.stop();
    } finally {
      current = undefined;
      intended = false;
    }
  }

  return {
    start,
    /** SIGTERM, then the same build again on its schema. */
    async restart(): Promise<void> {
      await stopCurrent();
      await start();
    },
    /** SIGTERM, then a new build on a schema of its own (a redeploy with a changed indexer). */
    async newBuild(): Promise<void> {
      await stopCurrent();
      build += 1;
      await start();
    },
    /** Resolves once a restart after an unplanned exit (if any) has finished. */
    async ready(): Promise<void> {
      await restarting;
    },
    diedByItself: () => diedByItself,
    stop: stopCurrent,
  };
}
