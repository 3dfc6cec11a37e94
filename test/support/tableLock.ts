import type { Database } from "../../api/db/connect.ts";

/**
 * Holds `table` in access exclusive mode on one of `database`'s connections, as a long migration
 * or a VACUUM FULL would, from its return until `release()`, which ends the lock's transaction.
 */
export async function holdTableLock(
  database: Database,
  table: string,
): Promise<{ release(): Promise<void> }> {
  let letGo = () => {};
  const lettingGo = new Promise<void>((resolve) => {
    letGo = resolve;
  });
  let locked = () => {};
  const isLocked = new Promise<void>((resolve) => {
    locked = resolve;
  });
  const holding = database.begin(async (transaction) => {
    await transaction.unsafe(`lock table ${table} in access exclusive mode`);
    locked();
    await lettingGo;
  });
  // A lock that could not be taken fails here, not in the test's later wait.
  await Promise.race([isLocked, holding]);
  return {
    async release() {
      letGo();
      await holding;
    },
  };
}
