/**
 * A read shared by every caller: while it is in flight and for `ttlMs` after it succeeded, callers
 * get the same promise instead of starting their own. A failed read is not kept (the next caller
 * tries again). For public reads that are expensive and may be a few seconds old: health, metrics,
 * ledger totals and stats. `forget()` makes the next call read anew (e.g. on a NOTIFY that the
 * data changed).
 */
export interface SharedRead<T> {
  (): Promise<T>;
  forget(): void;
}

export function sharedFor<T>(ttlMs: number, read: () => Promise<T>): SharedRead<T> {
  let cached: { value: Promise<T>; settledAt: number | null } | undefined;
  const shared = (() => {
    const now = Date.now();
    if (cached && (cached.settledAt === null || now - cached.settledAt < ttlMs)) {
      return cached.value;
    }
    const entry: { value: Promise<T>; settledAt: number | null } = {
      value: Promise.resolve().then(read),
      settledAt: null,
    };
    cached = entry;
    entry.value.then(
      () => {
        entry.settledAt = Date.now();
      },
      () => {
        if (cached === entry) cached = undefined;
      },
    );
    return entry.value;
  }) as SharedRead<T>;
  shared.forget = () => {
    cached = undefined;
  };
  return shared;
}
