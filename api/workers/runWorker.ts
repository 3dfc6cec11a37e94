import type { Database } from "../db/connect.ts";
import type { Logger } from "../logger.ts";

export interface Worker {
  name: string;
  /** Postgres advisory lock key: one replica runs this worker, the others stand by. */
  lockKey: number;
  intervalMs: number;
  /** One round of work. Returns true when there is more to do right away. */
  tick(): Promise<boolean>;
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
  let wake: (() => void) | undefined;
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });

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
          let more = false;
          try {
            more = await worker.tick();
            failures = 0;
          } catch (error) {
            failures += 1;
            log.error({ err: error, failures }, "tick failed");
          }
          if (!more && !stopping) {
            const backoff = failures > 0 ? Math.min(MAX_BACKOFF_MS, 250 * 2 ** failures) : 0;
            await pause(Math.max(worker.intervalMs, backoff));
          }
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
    },
  };
}
