import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { CLAIM_PAGE_SCRIPT } from "../../api/pages/claimPageScript.ts";
import {
  CLAIM_STATUSES,
  FINAL_CLAIM_STATUSES,
  isFinalClaimStatus,
} from "../../api/schemas/claimStatus.ts";

/**
 * Which claim statuses are final is said once (api/schemas/claimStatus.ts): the core answers
 * `final` with every claim, and the page's script and the CLI take the same list.
 */

const root = resolve(import.meta.dirname, "..", "..");

function sourceFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

describe("the final claim statuses", () => {
  it("are claim statuses, and only they are final", () => {
    for (const status of FINAL_CLAIM_STATUSES) expect(CLAIM_STATUSES).toContain(status);
    expect(CLAIM_STATUSES.filter(isFinalClaimStatus)).toEqual(["completed", "failed", "expired"]);
    expect(isFinalClaimStatus("paying")).toBe(false);
    expect(isFinalClaimStatus("")).toBe(false);
  });

  it("reach the claim page's script from the one list", () => {
    expect(CLAIM_PAGE_SCRIPT).toContain(`${JSON.stringify(FINAL_CLAIM_STATUSES)}.includes(shown)`);
  });

  it("are listed nowhere else in the service or the CLI", () => {
    // A list made of final statuses only (two or three), in any quotes: an array, a Set, an
    // SQL `in (…)`.
    const status = "[\"'`](completed|failed|expired)[\"'`]";
    const list = new RegExp(`[[(]\\s*${status}(,\\s*${status}){1,2}\\s*,?\\s*[\\])]`);
    const elsewhere = [...sourceFiles(join(root, "api")), ...sourceFiles(join(root, "cli"))]
      .filter((file) => !file.endsWith(join("api", "schemas", "claimStatus.ts")))
      .filter((file) => list.test(readFileSync(file, "utf8")))
      .map((file) => relative(root, file));
    expect(elsewhere).toEqual([]);
  });
});
