/**
 * The live streams one client holds in this process, counted together whatever they follow (a
 * claim's events over SSE or GraphQL, new ledger entries): at most `perClient` at once
 * (EVENT_STREAMS_PER_CLIENT, docs/events.md#live-streams).
 */
export interface StreamSlots {
  /** Takes a slot for `client`; false when it holds `perClient` already. */
  take(client: string): boolean;
  /** Gives back a slot taken. */
  give(client: string): void;
}

export function streamSlots(perClient: number): StreamSlots {
  const open = new Map<string, number>();
  return {
    take(client) {
      const held = open.get(client) ?? 0;
      if (held >= perClient) return false;
      open.set(client, held + 1);
      return true;
    },
    give(client) {
      const left = (open.get(client) ?? 1) - 1;
      if (left <= 0) open.delete(client);
      else open.set(client, left);
    },
  };
}
