import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { type BrowserContext, chromium } from "playwright-core";

/**
 * Real headless Chromium for page tests, driven by playwright-core with a fresh profile per
 * run. The browser comes with `npm install`: @sparticuz/chromium ships a Chromium headless shell
 * inside its npm package (brotli-compressed, no download at install), which needs only glibc.
 * It is unpacked once per checkout under node_modules/.cache/. CHROMIUM_PATH picks another
 * binary instead (Debian's is /usr/bin/chromium). Playwright's own browser downloads need the
 * internet, which these machines do not reach.
 */

const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

const repositoryRoot = join(import.meta.dirname, "..", "..");

export interface TestBrowser {
  context: BrowserContext;
  close(): Promise<void>;
}

interface ChromiumPackage {
  default: { executablePath(input?: string): Promise<string> };
}

/**
 * The Chromium the page tests run: CHROMIUM_PATH when set (and it must exist), otherwise the
 * packaged one, unpacked on first use. Throws, saying what is missing, when there is none.
 */
export async function chromiumExecutable(
  env: Record<string, string | undefined> = process.env,
): Promise<{ path: string; fontConfig?: string }> {
  const chosen = env.CHROMIUM_PATH;
  if (chosen) {
    if (!existsSync(chosen)) {
      throw new Error(
        `Chromium is missing at ${chosen} (CHROMIUM_PATH). Unset CHROMIUM_PATH to use the ` +
          "Chromium that `npm install` brings (@sparticuz/chromium), or install one there.",
      );
    }
    return { path: chosen };
  }
  let packageFolder: string;
  try {
    // Its exports hide package.json: the entry point is build/index.js.
    packageFolder = dirname(dirname(createRequire(import.meta.url).resolve("@sparticuz/chromium")));
  } catch {
    throw new Error(
      "Chromium is missing: the devDependency @sparticuz/chromium is not installed. Run " +
        "`npm install`, or set CHROMIUM_PATH to a Chromium binary.",
    );
  }
  const { version } = JSON.parse(await readFile(join(packageFolder, "package.json"), "utf8")) as {
    version: string;
  };
  const folder = join(
    repositoryRoot,
    "node_modules",
    ".cache",
    "pay-and-earn",
    `chromium-${version}`,
  );
  const path = join(folder, "chromium");
  if (!existsSync(path)) await unpackChromium(join(packageFolder, "bin"), folder);
  return { path, fontConfig: join(folder, "fonts.conf") };
}

/**
 * Unpacks into a folder of its own, then renames it into place, so that two test files (or two
 * runs) starting at once never see half a binary. The package unpacks into os.tmpdir(), which
 * reads TMPDIR at each call; it reads it before its first await (docs/traps.md#sparticuzchromium).
 */
async function unpackChromium(binFolder: string, folder: string): Promise<void> {
  await mkdir(dirname(folder), { recursive: true });
  const staging = await mkdtemp(`${folder}.unpacking-`);
  try {
    const { default: Chromium } = (await import("@sparticuz/chromium")) as ChromiumPackage;
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = staging;
    let unpacked: Promise<string>;
    try {
      unpacked = Chromium.executablePath(binFolder);
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
    if ((await unpacked) !== join(staging, "chromium")) {
      throw new Error(`@sparticuz/chromium unpacked to ${await unpacked}, not into ${staging}`);
    }
    // Its fonts (Open Sans) and the system's, whichever the machine has.
    await writeFile(
      join(staging, "fonts.conf"),
      [
        '<?xml version="1.0"?>',
        '<!DOCTYPE fontconfig SYSTEM "fonts.dtd">',
        "<fontconfig>",
        `  <dir>${join(folder, "fonts")}</dir>`,
        "  <dir>/usr/share/fonts</dir>",
        `  <cachedir>${join(folder, "fonts-cache")}</cachedir>`,
        "</fontconfig>",
        "",
      ].join("\n"),
    );
    await rename(staging, folder).catch((error: NodeJS.ErrnoException) => {
      // Another run unpacked the same version first: use that one.
      if (!existsSync(join(folder, "chromium"))) throw error;
    });
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** Fails, never skips, when Chromium is missing: a page test that did not run proves nothing. */
export async function startBrowser(
  viewport: { width: number; height: number } = { width: 1280, height: 900 },
  options: { javaScriptEnabled?: boolean } = {},
): Promise<TestBrowser> {
  const executable = await chromiumExecutable();
  const profile = await mkdtemp(join(tmpdir(), "pay-and-earn-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: executable.path,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport,
    javaScriptEnabled: options.javaScriptEnabled ?? true,
    ...(executable.fontConfig
      ? { env: { ...process.env, FONTCONFIG_FILE: executable.fontConfig } }
      : {}),
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
