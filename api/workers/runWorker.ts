import type { Database } from "../db/connect.ts";
import type { Logger } from "../logger.ts";

/** true: more to do right away; false: idle until the interval (or a wake-up); a number: run again in that many ms. */
export type TickResult = boolean | number;

export interface Worker {
  name: string;
  /** Postgres advisory lock key: one replica runs this worker, the others stand by. */
  lockKey: number;
  intervalMs: number;
  /**
   * A NOTIFY channel (see workers/wakeChannels.ts) that cuts the wait short: whoever makes
   * work for this worker notifies it, in any process, so nothing waits a whole interval.
   */
  wakeChannel?: string;
  tick(): Promise<TickResult>;
}

export interface RunningWorker {
  stop(): Promise<void>;
}

const MAX_BACKOFF_MS = 10_000;

/**
 * Runs `worker.tick` while holding its advisory lock on a connection of its own. A failed
 * tick is logged and retried with backoff, never a crash. Losing the connection loses the
 * lock (PostgreSQL releases it), so the loop checks the connection before every tick and
 * goes back to standing by when it is gone.
 */
export function runWorker(sql: Database, worker: Worker, logger: Logger): RunningWorker {
  const log = logger.child({ worker: worker.name });
  let stopping = false;
  // A wake-up that arrives while a tick runs is kept, so the next pause ends at once.
  let woken = false;
  let wake: (() => void) | undefined;
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      if (woken || stopping) {
        woken = false;
        resolve();
        return;
      }
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    }).finally(() => {
      wake = undefined;
      woken = false;
    });
  const nudge = () => {
    woken = true;
    wake?.();
  };

  const listening = worker.wakeChannel
    ? sql.listen(worker.wakeChannel, nudge).catch((error: unknown) => {
        log.warn({ err: error }, "cannot listen for wake-ups; polling only");
        return undefined;
      })
    : Promise.resolve(undefined);

  const done = (async () => {
    while (!stopping) {
      let connection: Awaited<ReturnType<Database["reserve"]>> | undefined;
      try {
        connection = await sql.reserve();
        const [row] = await connection<{ locked: boolean }[]>`
          select pg_try_advisory_lock(${worker.lockKey}) as locked`;
        if (!row?.locked) {
          connection.release();
          connection = undefined;
          await pause(Math.max(worker.intervalMs, 1_000));
          continue;
        }
        log.debug("holds the lock");
        let failures = 0;
        while (!stopping) {
          await connection`select 1`;
          let result: TickResult = false;
          try {
            result = await worker.tick();
            failures = 0;
          } catch (error) {
            failures += 1;
            log.error({ err: error, failures }, "tick failed");
          }
          if (stopping || result === true) continue;
          const delay =
            failures > 0
              ? Math.max(worker.intervalMs, Math.min(MAX_BACKOFF_MS, 250 * 2 ** failures))
              : typeof result === "number"
                ? result
                : worker.intervalMs;
          await pause(delay);
        }
        await connection`select pg_advisory_unlock(${worker.lockKey})`;
      } catch (error) {
        if (!stopping) {
          log.warn({ err: error }, "lost its database connection; standing by");
          await pause(1_000);
        }
      } finally {
        connection?.release();
      }
    }
  })();

  return {
    async stop() {
      stopping = true;
      wake?.();
      await done;
      await (await listening)?.unlisten();
    },
  };
}
