import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { addMissingOptionalEntries } from "../../scripts/lockfile/completeLockfile.ts";

describe("package-lock.json", () => {
  it("has an entry for every optional dependency, so `npm ci` accepts it here", () => {
    const lockfile = JSON.parse(
      readFileSync(join(import.meta.dirname, "..", "..", "package-lock.json"), "utf8"),
    );
    expect(addMissingOptionalEntries(lockfile.packages)).toEqual([]);
  });

  it("adds a bare optional entry for a platform build the registry lacks", () => {
    const packages = {
      "": {},
      "node_modules/tool": { version: "1.0.0", optionalDependencies: { "tool-win32": "1.0.0" } },
    };
    expect(addMissingOptionalEntries(packages)).toEqual(["tool-win32"]);
    expect(packages).toHaveProperty(["node_modules/tool-win32"], {
      version: "1.0.0",
      optional: true,
    });
  });
});
