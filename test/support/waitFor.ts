/**
 * Polls `check` until it returns a value other than undefined/false, then returns it.
 * Waiting on a condition, never on a fixed sleep: the timeout is only the failure bound.
 * `what` may be a function, asked when the wait runs out: a failure then says what it last saw.
 */
export async function waitFor<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  options: { timeoutMs?: number; intervalMs?: number; what?: string | (() => string) } = {},
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 20_000);
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      lastError = error;
    }
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 50));
  }
  const suffix = lastError ? ` (last error: ${(lastError as Error).message})` : "";
  const what = typeof options.what === "function" ? options.what() : options.what;
  throw new Error(`Timed out waiting for ${what ?? "a condition"}${suffix}`);
}
