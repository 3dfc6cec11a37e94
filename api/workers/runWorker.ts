import type { Database } from "../db/connect.ts";
import type { Logger } from "../logger.ts";
import type { WakeChannel } from "./wakeChannels.ts";

/** true: more to do right away; false: idle until the interval (or a wake-up); a number: run again in that many ms. */
export type TickResult = boolean | number;

export interface WorkerLock {
  held(): boolean;
}

export interface Worker {
  name: string;
  /** Postgres advisory lock key: one replica runs this worker, the others stand by. */
  lockKey: number;
  intervalMs: number;
  /**
   * NOTIFY channels (see workers/wakeChannels.ts) that cut the wait short: whoever makes work
   * for this worker notifies one of them, in any process, so nothing waits a whole interval.
   */
  wakeChannels?: readonly WakeChannel[];
  /**
   * One tick. `lock.held()` turns false once the lock's connection has dropped: a tick that
   * does several passes asks it between them (the loop itself checks before every tick).
   * Absent when a test drives the ticks by hand, with no lock to lose.
   */
  tick(lock?: WorkerLock): Promise<TickResult>;
  /**
   * For a worker whose work goes on between its ticks (the webhook sender's requests in flight):
   * called once with the loop's wake-up, which ends the loop's pause at once, so that work that
   * finished (a slot freed) is followed up without waiting for the interval.
   */
  wakeWith?(wake: () => void): void;
  /**
   * Awaited each time the loop stops holding the lock (stopping, or the lock's connection lost),
   * before it gives the lock back or stands by: work begun under the lock is ended or given up
   * under it.
   */
  settle?(): Promise<void>;
}

export type FirstTick = "holding" | "standing_by" | "stopped";

export interface RunningWorker {
  name: string;
  /**
   * Settles after the loop's first tick: "holding" once it took its lock and ran its first
   * tick (failed or not), "standing_by" when another replica holds the lock or the database
   * could not be asked, "stopped" when it was stopped first. Never rejects.
   */
  firstTick: Promise<FirstTick>;
  stop(): Promise<void>;
}

const MAX_BACKOFF_MS = 10_000;

export interface WorkerConnections {
  /**
   * Opens the loop's own one-connection session for its advisory lock; `onClose` is called when
   * that connection drops (its lock with it). See db/servicePools.ts, workerLockSession.
   */
  lockSession(onClose: () => void): Database;
  /** Where wake-ups are listened for (one LISTEN connection per pool, shared by the loops). */
  notifications: Pick<Database, "listen">;
}

/**
 * Runs `worker.tick` while holding its advisory lock on a connection of its own. A failed
 * tick is logged and retried with backoff, never a crash. Losing the connection loses the
 * lock (PostgreSQL releases it): the session says so when it drops, and the loop checks
 * before every tick and goes back to taking the lock, or standing by.
 */
export function runWorker(
  connections: WorkerConnections,
  worker: Worker,
  logger: Logger,
): RunningWorker {
  const log = logger.child({ worker: worker.name });
  let stopping = false;
  // A wake-up that arrives while a tick runs is kept, so the next pause ends at once. One by a
  // lost connection or by the worker's own work ends any pause; one by a NOTIFY channel ends only
  // an ordinary pause: a failing worker keeps its backoff and a standby its pace, however often
  // its channels fire (the matcher's fires with every block the indexer commits).
  let woken = false;
  let wokenByChannel = false;
  let channelsEndPause = true;
  let wake: (() => void) | undefined;
  const pause = (ms: number, endsOnChannel = true) =>
    new Promise<void>((resolve) => {
      if (stopping || woken || (endsOnChannel && wokenByChannel)) {
        resolve();
        return;
      }
      channelsEndPause = endsOnChannel;
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    }).finally(() => {
      wake = undefined;
      woken = false;
      wokenByChannel = false;
      channelsEndPause = true;
    });
  const nudge = () => {
    woken = true;
    wake?.();
  };
  const nudgeByChannel = () => {
    wokenByChannel = true;
    if (channelsEndPause) wake?.();
  };
  worker.wakeWith?.(nudge);
  const settle = async () => {
    try {
      await worker.settle?.();
    } catch (error) {
      log.error({ err: error }, "could not settle the work under way");
    }
  };

  const listening = (worker.wakeChannels ?? []).map((channel) =>
    connections.notifications.listen(channel, nudgeByChannel).catch((error: unknown) => {
      log.warn({ err: error, channel }, "cannot listen for wake-ups; polling only");
      return undefined;
    }),
  );

  // Set when the session's connection drops; cleared each time the lock is taken again.
  let lost = false;
  const session = connections.lockSession(() => {
    lost = true;
    nudge();
  });

  const lockState = { held: () => !lost && !stopping };
  let settleFirstTick: (state: FirstTick) => void = () => {};
  const firstTick = new Promise<FirstTick>((resolve) => {
    settleFirstTick = resolve;
  });
  const done = (async () => {
    while (!stopping) {
      let locked = false;
      try {
        lost = false;
        const [row] = await session<{ locked: boolean }[]>`
          select pg_try_advisory_lock(${worker.lockKey}) as locked`;
        if (!row?.locked || lost) {
          settleFirstTick("standing_by");
          await pause(Math.max(worker.intervalMs, 1_000), false);
          continue;
        }
        locked = true;
        log.debug("holds the lock");
        let failures = 0;
        while (!stopping) {
          await session`select 1`;
          // A new connection answered: the one that held the lock is gone, and the lock with it.
          if (lost) throw new Error("the lock's connection was closed");
          let result: TickResult = false;
          try {
            result = await worker.tick(lockState);
            failures = 0;
          } catch (error) {
            failures += 1;
            log.error({ err: error, failures }, "tick failed");
          }
          settleFirstTick("holding");
          if (stopping || result === true) continue;
          const delay =
            failures > 0
              ? Math.max(worker.intervalMs, Math.min(MAX_BACKOFF_MS, 250 * 2 ** failures))
              : typeof result === "number"
                ? result
                : worker.intervalMs;
          await pause(delay, failures === 0);
        }
        await settle();
        if (!lost) await session`select pg_advisory_unlock(${worker.lockKey})`;
      } catch (error) {
        if (locked) await settle();
        if (!stopping) {
          settleFirstTick("standing_by");
          log.warn({ err: error, held_lock: locked }, "lost its database connection; standing by");
          await pause(1_000, false);
        }
      }
    }
  })().finally(() => settleFirstTick("stopped"));

  return {
    name: worker.name,
    firstTick,
    async stop() {
      stopping = true;
      wake?.();
      await done;
      try {
        const listeners = await Promise.all(listening);
        await Promise.allSettled(listeners.map((listener) => listener?.unlisten()));
      } finally {
        await session.end({ timeout: 5 });
      }
    },
  };
}
