/**
 * `promise`, or a rejection after `ms`. The work itself goes on (a query or an RPC call cannot
 * be taken back); the caller just stops waiting for it. For checks that must answer on time
 * even when the database or the RPC hangs: health, metrics, rate limits.
 */
export function withTimeout<T>(
  promise: Promise<T>,
  ms: number,
  what = "the operation",
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  const work = Promise.resolve(promise);
  // A late rejection of the abandoned work must not become an unhandled rejection.
  work.catch(() => {});
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
