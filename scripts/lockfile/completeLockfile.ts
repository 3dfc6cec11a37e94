import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/**
 * The npm registry these machines reach lacks most other-platform builds of packages that
 * ship binaries (Biome, Rollup, Anvil for macOS, Windows, musl …). `npm install` then leaves
 * those optional dependencies out of package-lock.json, and `npm ci` refuses the lockfile
 * as "Missing: @biomejs/cli-win32-x64@ from lock file". This adds a bare entry (name, version,
 * optional) for each: `npm ci` accepts it and, as for any optional dependency that does not
 * fit or cannot be fetched, installs it only where it can.
 *
 * Runs as the root `postinstall`, which npm runs after it has written the lockfile.
 */

interface LockEntry {
  version?: string;
  optional?: boolean;
  dev?: boolean;
  optionalDependencies?: Record<string, string>;
}

const lockfilePath = join(import.meta.dirname, "..", "..", "package-lock.json");

export function addMissingOptionalEntries(packages: Record<string, LockEntry>): string[] {
  const added: string[] = [];
  for (const [path, entry] of Object.entries(packages)) {
    for (const [name, version] of Object.entries(entry.optionalDependencies ?? {})) {
      const nested = `${path ? `${path}/` : ""}node_modules/${name}`;
      const hoisted = `node_modules/${name}`;
      if (packages[nested] || packages[hoisted]) continue;
      packages[hoisted] = { version, optional: true, ...(entry.dev ? { dev: true } : {}) };
      added.push(name);
    }
  }
  return added;
}

if (import.meta.main) {
  const lockfile = JSON.parse(readFileSync(lockfilePath, "utf8")) as {
    packages: Record<string, LockEntry>;
  };
  const added = addMissingOptionalEntries(lockfile.packages);
  if (added.length > 0) {
    lockfile.packages = Object.fromEntries(
      Object.entries(lockfile.packages).sort(([a], [b]) =>
        a === "" ? -1 : b === "" ? 1 : a.localeCompare(b),
      ),
    );
    writeFileSync(lockfilePath, `${JSON.stringify(lockfile, null, 2)}\n`);
  }
}
