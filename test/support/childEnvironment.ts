import { join } from "node:path";

/**
 * Where Node keeps the compiled code of the modules it loads (NODE_COMPILE_CACHE, Node ≥ 22.1),
 * for every Node process the tests start: Ponder, the CLI, service processes and vitest's own
 * workers. A Ponder start spent ~1.5 s of its ~3.8 s of CPU compiling the same modules again;
 * with the cache each start after the first reads them back (docs/testing.md#speed).
 */
export const COMPILE_CACHE_DIRECTORY = join(
  import.meta.dirname,
  "..",
  "..",
  "node_modules",
  ".cache",
  "pay-and-earn",
  "node-compile-cache",
);

/**
 * What every child process of a test gets from the test's own environment, besides what the
 * test gives it: the command path, the home directory and the compile cache. Nothing else
 * leaks in (a test's process sees only the settings the test chose).
 */
export function childEnvironment(): Record<string, string> {
  return {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "",
    NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE ?? COMPILE_CACHE_DIRECTORY,
  };
}
