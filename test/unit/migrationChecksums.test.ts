import { describe, expect, it } from "vitest";
import { driftedMigrations, migrationChecksum, readMigrations } from "../../api/db/migrate.ts";

describe("an applied migration's checksum", () => {
  it("is not drift when the file changed in its comments only (a recorded earlier text)", async () => {
    const migrations = await readMigrations();
    const claimsTogether = migrations.find((migration) => migration.id === 14);
    expect(claimsTogether).toBeDefined();
    // 0014's text before its comments cited a BENCHMARKS.md section instead of a run's number.
    const earlierText = "8354994aca8e4894903dbd8f952c97c2e03414175bb964c61c82eac167098be1";
    expect(earlierText).not.toBe(migrationChecksum(claimsTogether as never));
    expect(driftedMigrations([{ id: 14, checksum: earlierText }] as never, migrations)).toEqual([]);
  });

  it("is drift for any other text", async () => {
    const migrations = await readMigrations();
    const drifted = driftedMigrations(
      [
        { id: 14, checksum: "0".repeat(64) },
        { id: 16, checksum: "8354994aca8e4894903dbd8f952c97c2e03414175bb964c61c82eac167098be1" },
      ] as never,
      migrations,
    );
    expect(drifted.map((migration) => migration.id)).toEqual([14, 16]);
  });
});
