import type { Database } from "../../api/db/connect.ts";

/**
 * Holds `tables` on one of `database`'s connections from its return until `release()`, which
 * ends the lock's transaction: in access exclusive mode by default, as a long migration or a
 * VACUUM FULL would; in row exclusive mode, as a writer (an insert or update) does.
 */
export async function holdTableLock(
  database: Database,
  tables: string | string[],
  mode: "access exclusive" | "row exclusive" = "access exclusive",
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
    // The tests' own table names and a mode of the type's literals, not input.
    await transaction.unsafe(`lock table ${[tables].flat().join(", ")} in ${mode} mode`);
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
