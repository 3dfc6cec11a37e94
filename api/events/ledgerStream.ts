import type { Database } from "../db/connect.ts";
import { type LedgerEntry, readLedgerEntries } from "../ledger/listLedgerEntries.ts";
import type { Logger } from "../logger.ts";
import type { Refusal } from "../reasons/refusal.ts";
import { WAKE_CHANNELS } from "../workers/wakeChannels.ts";
import { singleFlightRead } from "./singleFlightRead.ts";
import type { StreamSlots } from "./streamSlots.ts";

/**
 * How far below the newest completion seen a read looks again. Event ids are taken when a
 * transaction writes, not when it commits: a completion committed after a later-numbered one
 * is still found if it is within this many ids of it (a completing transaction is short).
 */
const LOOK_BACK_IDS = 5_000n;

/** New ledger entries for one client: what the GraphQL subscription `ledgerEntryAdded` writes. */
export interface LedgerStream {
  /** Calls `onEntry` for each entry added from now on (a claim completed), until `close()`. */
  start(onEntry: (entry: LedgerEntry) => void): void;
  /** When the stream must end (EVENT_STREAM_MAX_SECONDS). */
  endsAt: Date;
  close(): void;
}

export type OpenLedgerStreamResult =
  | { type: "stream"; stream: LedgerStream }
  | Extract<Refusal, { type: "too_many_streams" }>;

/** The ledger's live additions, one reader for every stream of the process. */
export interface LedgerFeed {
  open(client: string, agentName: string | undefined): Promise<OpenLedgerStreamResult>;
  stop(): Promise<void>;
}

/**
 * One reader for every ledger stream of the process: woken by the events' NOTIFY (and a poll in
 * case one was lost), it reads the `claim.completed` events it has not seen, then those claims'
 * ledger entries in one query, and hands each to the streams that want it (all, or one agent's).
 * A stream gets the entries of completions committed after it opened; a claim completed again
 * after a reorg undid its completion is added again. A client holds at most
 * EVENT_STREAMS_PER_CLIENT streams of any kind at once.
 */
export function createLedgerFeed(
  sql: Database,
  logger: Logger,
  options: { pollMs: number; maxMs: number; perClient: number; slots: StreamSlots },
): LedgerFeed {
  const subscribers = new Set<{
    agentName: string | undefined;
    onEntry: (entry: LedgerEntry) => void;
  }>();
  /** Completions seen, by event id, down to the newest less LOOK_BACK_IDS. */
  const seen = new Set<bigint>();
  let newest: bigint | undefined;
  let started: Promise<void> | undefined;
  let listening: { unlisten(): Promise<void> } | undefined;
  let poll: NodeJS.Timeout | undefined;
  let stopped = false;

  async function start(): Promise<void> {
    const [row] = await sql<{ newest: string }[]>`
      select coalesce(max(id), 0)::text as newest from app.events`;
    newest = BigInt(row?.newest ?? "0");
    listening = await sql.listen(WAKE_CHANNELS.events, read).catch((error: unknown) => {
      logger.warn({ err: error }, "cannot listen for events; the ledger stream polls");
      return undefined;
    });
    poll = setInterval(read, options.pollMs);
    poll.unref();
  }

  const reads = singleFlightRead(readOnce, (error) =>
    logger.warn({ err: error }, "cannot read the ledger's additions"),
  );
  function read(): void {
    if (stopped || newest === undefined || subscribers.size === 0) return;
    reads.ask();
  }

  async function readOnce(): Promise<void> {
    const from = (newest ?? 0n) - LOOK_BACK_IDS;
    const completions = await sql<{ id: bigint; claim_id: string }[]>`
      select id, claim_id from app.events
      where id > ${String(from)}::bigint and type = 'claim.completed'
      order by id`;
    const fresh = completions.filter((event) => !seen.has(event.id));
    for (const event of fresh) {
      seen.add(event.id);
      if (newest === undefined || event.id > newest) newest = event.id;
    }
    for (const id of seen) if (id <= (newest ?? 0n) - LOOK_BACK_IDS) seen.delete(id);
    if (fresh.length === 0) return;
    const entries = new Map(
      (await readLedgerEntries(sql, [...new Set(fresh.map((event) => event.claim_id))])).map(
        (entry) => [entry.claimId, entry],
      ),
    );
    for (const event of fresh) {
      const entry = entries.get(event.claim_id);
      if (!entry) continue; // not in the ledger now (a reorg took it back)
      for (const subscriber of subscribers) {
        if (subscriber.agentName === undefined || subscriber.agentName === entry.agentName) {
          subscriber.onEntry(entry);
        }
      }
    }
  }

  return {
    async open(client, agentName) {
      if (!options.slots.take(client)) {
        return { type: "too_many_streams", limit: options.perClient };
      }
      try {
        started ??= start();
        await started;
      } catch (error) {
        started = undefined;
        options.slots.give(client);
        throw error;
      }
      let subscriber: { agentName: string | undefined; onEntry(entry: LedgerEntry): void };
      let closed = false;
      return {
        type: "stream",
        stream: {
          endsAt: new Date(Date.now() + options.maxMs),
          start(onEntry) {
            if (closed) return;
            subscriber = { agentName, onEntry };
            subscribers.add(subscriber);
          },
          close() {
            if (closed) return;
            closed = true;
            subscribers.delete(subscriber);
            options.slots.give(client);
          },
        },
      };
    },
    async stop() {
      stopped = true;
      clearInterval(poll);
      subscribers.clear();
      await reads.settled();
      await listening?.unlisten().catch(() => {});
    },
  };
}
