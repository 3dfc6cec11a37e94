import { readFileSync } from "node:fs";

export { commandOf, descendantsOf } from "../../scripts/devnet/processTree.ts";

/** The environment `pid` was started with (what /proc shows of it). */
export function environmentOf(pid: number): Record<string, string> {
  const text = readFileSync(`/proc/${pid}/environ`, "utf8");
  return Object.fromEntries(
    text
      .split("\0")
      .filter(Boolean)
      .map((entry) => {
        const at = entry.indexOf("=");
        return [entry.slice(0, at), entry.slice(at + 1)];
      }),
  );
}
