import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, extname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/**
 * Every relative link and `#anchor` in the repository's markdown resolves, and so does every
 * `<file>.md#anchor` a code comment points to: a section renamed or moved fails here, naming the
 * file and the link, instead of leaving a reader at a dead end.
 */

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const SKIPPED_FOLDERS = new Set(["node_modules", "test-results", "contracts-abi"]);
const CODE_FOLDERS = ["api", "cli", "scripts", "src", "test"];
/** The project's shared documents, beside the repository (../shared), not in it. */
const SHARED_DOCUMENTS = /^(SPEC|DESIGN|STACK|STYLE)\.md$/;

function filesUnder(folder: string, keep: (path: string) => boolean): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(folder, { withFileTypes: true })) {
    if (entry.name.startsWith(".") || SKIPPED_FOLDERS.has(entry.name)) continue;
    const path = join(folder, entry.name);
    if (entry.isDirectory()) found.push(...filesUnder(path, keep));
    else if (keep(path)) found.push(path);
  }
  return found;
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
function headingAnchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** Text outside fenced code blocks, where `[x](y)` is code, not a link. */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, "");
}

const anchorsByFile = new Map<string, Set<string>>();
function anchorsOf(file: string): Set<string> {
  let anchors = anchorsByFile.get(file);
  if (!anchors) {
    anchors = new Set();
    const seen = new Map<string, number>();
    for (const [, heading = ""] of prose(readFileSync(file, "utf8")).matchAll(/^#{1,6} (.+)$/gm)) {
      const base = headingAnchor(heading);
      const count = seen.get(base) ?? 0;
      seen.set(base, count + 1);
      anchors.add(count === 0 ? base : `${base}-${count}`);
    }
    anchorsByFile.set(file, anchors);
  }
  return anchors;
}

/** Why `target` (a path, maybe with `#anchor`) does not resolve from `from`; null when it does. */
function brokenLink(from: string, target: string): string | null {
  const [path = "", anchor] = target.split("#");
  const file = path === "" ? from : resolve(dirname(from), decodeURIComponent(path));
  if (relative(ROOT, file).startsWith("..")) return null; // outside the repository (../shared)
  if (!existsSync(file)) return `${target}: no such file`;
  if (anchor === undefined) return null;
  if (statSync(file).isDirectory() || extname(file) !== ".md") return `${target}: not a page`;
  return anchorsOf(file).has(anchor) ? null : `${target}: no heading with that anchor`;
}

describe("documentation links", () => {
  it("every relative link and #anchor in the markdown files resolves", () => {
    const broken: string[] = [];
    for (const file of filesUnder(ROOT, (path) => path.endsWith(".md"))) {
      for (const [, target = ""] of prose(readFileSync(file, "utf8")).matchAll(
        /\[[^\]]*\]\(([^)\s]+)\)/g,
      )) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("/")) continue;
        const problem = brokenLink(file, target);
        if (problem) broken.push(`${relative(ROOT, file)}: ${problem}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("every page and #anchor a code comment points to exists", () => {
    const broken: string[] = [];
    const files = [
      ...CODE_FOLDERS.flatMap((folder) =>
        filesUnder(
          join(ROOT, folder),
          (path) =>
            (path.endsWith(".ts") && !path.includes("/migrations/")) ||
            path.includes("/definitions/"),
        ),
      ),
      join(ROOT, "vitest.config.ts"),
      join(ROOT, "ponder.config.ts"),
      join(ROOT, ".env.example"),
    ];
    for (const file of files) {
      for (const [, target = ""] of readFileSync(file, "utf8").matchAll(
        /(?<![\w/.-])(?<!\]\()((?:docs\/|test\/attacks\/)?[\w-]+\.md(?:#[\w-]+)?)/g,
      )) {
        if (SHARED_DOCUMENTS.test(target)) continue;
        const problem = brokenLink(join(ROOT, "README.md"), target);
        if (problem) broken.push(`${relative(ROOT, file)}: ${problem}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("makes GitHub's anchors", () => {
    expect(headingAnchor("HTTP routes: `npm run bench:http`")).toBe(
      "http-routes-npm-run-benchhttp",
    );
    expect(headingAnchor("The mail intake's limits")).toBe("the-mail-intakes-limits");
    expect(headingAnchor("Layers of `api/`")).toBe("layers-of-api");
    expect(headingAnchor("@sparticuz/chromium")).toBe("sparticuzchromium");
  });
});
