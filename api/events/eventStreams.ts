import type { Database } from "../db/connect.ts";
import type { Logger } from "../logger.ts";
import { WAKE_CHANNELS } from "../workers/wakeChannels.ts";
import type { StoredEvent } from "./eventEnvelope.ts";
import { readEventsOfClaims } from "./readEvents.ts";
import { singleFlightRead } from "./singleFlightRead.ts";

export interface EventSubscription {
  close(): void;
}

/** Live events of claims, for the SSE stream and GraphQL subscriptions. */
export interface EventStreams {
  /**
   * Calls `onEvent` with every event of `claimId` after `afterId`, in order, first those already
   * written, then each as it is committed, until `close()`.
   */
  subscribe(
    claimId: string,
    afterId: bigint,
    onEvent: (event: StoredEvent) => void,
  ): EventSubscription;
  /** Streams open in this process. */
  open(): number;
  stop(): Promise<void>;
}

interface Subscriber {
  claimId: string;
  lastId: bigint;
  onEvent(event: StoredEvent): void;
}

/**
 * One reader for every stream of the process: the database says on commit that events were
 * written (the NOTIFY of the triggers of api/db/definitions/events.sql, whoever wrote them, in any process), and one
 * query reads what each subscribed claim has after the last event its subscribers got. A claim's
 * events commit in the order of their ids (each change holds the claim's row lock), so a cursor
 * per claim misses none. `pollMs` reads anyway, in case a notification was lost with its
 * connection.
 */
export function createEventStreams(
  sql: Database,
  logger: Logger,
  options: { pollMs: number },
): EventStreams {
  const byClaim = new Map<string, Set<Subscriber>>();
  let listening: Promise<{ unlisten(): Promise<void> } | undefined> | undefined;
  let poll: NodeJS.Timeout | undefined;
  let stopped = false;

  const reads = singleFlightRead(readOnce, (error) =>
    logger.warn({ err: error }, "cannot read events for streams"),
  );
  function read(): void {
    if (stopped) return;
    reads.ask();
  }

  async function readOnce(askAgain: () => void): Promise<void> {
    const after = new Map<string, bigint>();
    for (const [claimId, subscribers] of byClaim) {
      let least: bigint | undefined;
      for (const subscriber of subscribers) {
        if (least === undefined || subscriber.lastId < least) least = subscriber.lastId;
      }
      if (least !== undefined) after.set(claimId, least);
    }
    const events = await readEventsOfClaims(sql, after);
    for (const event of events) {
      if (event.claim_id === null) continue;
      for (const subscriber of byClaim.get(event.claim_id) ?? []) {
        if (event.id <= subscriber.lastId) continue;
        subscriber.lastId = event.id;
        subscriber.onEvent(event);
      }
    }
    // A full read may have left more behind.
    if (events.length >= 2_000) askAgain();
  }

  function start(): void {
    if (listening) return;
    listening = sql.listen(WAKE_CHANNELS.events, read).catch((error: unknown) => {
      logger.warn({ err: error }, "cannot listen for events; streams poll");
      return undefined;
    });
    poll = setInterval(read, options.pollMs);
    poll.unref();
  }

  return {
    subscribe(claimId, afterId, onEvent) {
      start();
      const subscriber: Subscriber = { claimId, lastId: afterId, onEvent };
      let subscribers = byClaim.get(claimId);
      if (!subscribers) {
        subscribers = new Set();
        byClaim.set(claimId, subscribers);
      }
      subscribers.add(subscriber);
      read();
      return {
        close() {
          const set = byClaim.get(claimId);
          set?.delete(subscriber);
          if (set?.size === 0) byClaim.delete(claimId);
        },
      };
    },
    open: () => [...byClaim.values()].reduce((sum, set) => sum + set.size, 0),
    async stop() {
      stopped = true;
      clearInterval(poll);
      byClaim.clear();
      await reads.settled();
      await (await listening)?.unlisten().catch(() => {});
    },
  };
}
