import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * The surfaces receive the core, not the database (ARCHITECTURE.md#adding-a-surface): no
 * surface file names a pool or a transaction, writes a query, or calls the modules that own
 * the tables (it may name their types: a queued mail, a stored message).
 */

const apiRoot = resolve(import.meta.dirname, "..", "..", "api");
const SURFACES = ["http", "graphql", "pages", "mcp", "a2a", "mail"];
/** Modules whose functions take a pool: a surface asks the core instead. */
const TABLE_OWNERS =
  /^(db\/connect|db\/servicePools|mailbox\/|agentTasks\/|rateLimits\/(batchedCounter|rateLimitCounter|requestCounts))/;

function sourceFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

describe("the surfaces", () => {
  const files = SURFACES.flatMap((surface) => sourceFiles(join(apiRoot, surface)));

  it("call no module that owns a table, only its types", () => {
    const calls = files.flatMap((file) =>
      [...readFileSync(file, "utf8").matchAll(/^import (?!type )[^;]*?from "(\.[^"]+)";/gms)]
        .map((match) => relative(apiRoot, resolve(file, "..", match[1] as string)))
        .filter((target) => TABLE_OWNERS.test(target))
        .map((target) => `${relative(apiRoot, file)} → ${target}`),
    );
    expect(calls).toEqual([]);
  });

  it("name no pool or transaction and write no query", () => {
    const found = files.filter((file) =>
      /\b(Sql|Database)\b|\b(sql|transaction)`|\.begin\(/.test(readFileSync(file, "utf8")),
    );
    expect(found.map((file) => relative(apiRoot, file))).toEqual([]);
  });
});
