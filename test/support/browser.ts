import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium } from "playwright-core";

/**
 * Real headless Chromium for page tests: Debian's `chromium` (apt), driven by playwright-core,
 * with a fresh profile per run. Playwright's own browser downloads need the internet; this
 * machine has none, so the system browser it is.
 */

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

export interface TestBrowser {
  context: BrowserContext;
  close(): Promise<void>;
}

/** Fails, never skips, when Chromium is missing: a page test that did not run proves nothing. */
export async function startBrowser(
  viewport: { width: number; height: number } = { width: 1280, height: 900 },
  options: { javaScriptEnabled?: boolean } = {},
): Promise<TestBrowser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(
      `Chromium is missing at ${CHROMIUM_PATH}. Install it with ` +
        "`apt-get update && apt-get install -y chromium` (.ci/run does), or set CHROMIUM_PATH.",
    );
  }
  const profile = await mkdtemp(join(tmpdir(), "pay-and-earn-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport,
    javaScriptEnabled: options.javaScriptEnabled ?? true,
  });
  return {
    context,
    async close() {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}

/** Where screenshots go: test-results/ (git-ignored) at the repository root. */
export async function screenshotPath(name: string): Promise<string> {
  const directory = join(import.meta.dirname, "..", "..", "test-results");
  await mkdir(directory, { recursive: true });
  return join(directory, `${name}-${new Date().toISOString().replace(/[:.]/g, "-")}.png`);
}
