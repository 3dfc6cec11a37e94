import { connectDatabase, type Database } from "../../api/db/connect.ts";
import { migrate } from "../../api/db/migrate.ts";
import { startTestChain, type TestChain } from "./chain.ts";
import { createTestDatabase, type TestDatabase } from "./database.ts";

export interface ChainWithDatabase {
  chain: TestChain;
  database: TestDatabase;
  /** A small pool of the test's own on `database` (connects on its first query). */
  sql: Database;
  /**
   * Ends `sql`, stops the chain and drops the database, in that order, each even when an
   * earlier step fails (the first failure is thrown at the end). Stop the file's own services
   * (which use the chain and the database) before calling it.
   */
  stop(): Promise<void>;
}

/**
 * A test file's own chain and database, started side by side, with a pool on the database
 * (migrated first when `migrate` is set). When any part fails to start, the parts that did
 * start are torn down before the failure is thrown.
 */
export async function startChainWithDatabase(
  options: { migrate?: boolean } = {},
): Promise<ChainWithDatabase> {
  const [chainResult, databaseResult] = await Promise.allSettled([
    startTestChain(),
    createTestDatabase(),
  ]);
  const chain = chainResult.status === "fulfilled" ? chainResult.value : undefined;
  const database = databaseResult.status === "fulfilled" ? databaseResult.value : undefined;
  let sql: Database | undefined;
  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= runAll([
      () => sql?.end({ timeout: 5 }),
      () => chain?.stop(),
      () => database?.drop(),
    ]);
    return stopping;
  };

  try {
    if (chainResult.status === "rejected") throw chainResult.reason;
    if (databaseResult.status === "rejected") throw databaseResult.reason;
    sql = connectDatabase(databaseResult.value.url, { max: 2 });
    if (options.migrate) await migrate(sql);
    return { chain: chainResult.value, database: databaseResult.value, sql, stop };
  } catch (error) {
    await stop().catch(() => {});
    throw error;
  }
}

/** Runs every step in order, whatever fails; then throws the first failure, if any. */
async function runAll(steps: (() => Promise<unknown> | undefined)[]): Promise<void> {
  const failures: unknown[] = [];
  for (const step of steps) {
    try {
      await step();
    } catch (error) {
      failures.push(error);
    }
  }
  if (failures.length > 0) throw failures[0];
}
