import { AxeBuilder } from "@axe-core/playwright";
import type { Page } from "playwright-core";
import { expect } from "vitest";
import { screenshotPath, type TestBrowser } from "./browser.ts";

/** Page-test helpers: a page that records what must never happen, screenshots, accessibility. */

export interface WatchedPage {
  page: Page;
  /** Dialogs opened, console errors (CSP violations included), page errors, every request. */
  seen: { dialogs: string[]; errors: string[]; requests: string[] };
}

export async function watchedPage(browser: TestBrowser): Promise<WatchedPage> {
  const page = await browser.context.newPage();
  const seen = { dialogs: [] as string[], errors: [] as string[], requests: [] as string[] };
  page.on("dialog", (dialog) => {
    seen.dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  page.on("console", (message) => {
    // A page answered 4xx on purpose (a refused form) is logged as a failed load; failed
    // subresources are caught below, by their response.
    if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) {
      seen.errors.push(message.text());
    }
  });
  page.on("response", (response) => {
    if (response.status() >= 400 && response.request().resourceType() !== "document") {
      seen.errors.push(`${response.status()} ${response.url()}`);
    }
  });
  page.on("pageerror", (error) => seen.errors.push(error.message));
  page.on("request", (request) => seen.requests.push(request.url()));
  return { page, seen };
}

/** Requests that left `origin` (a page must load nothing from anywhere else). */
export function foreignRequests(requests: string[], origin: string): string[] {
  return requests.filter(
    (url) => !url.startsWith("data:") && !url.startsWith("blob:") && new URL(url).origin !== origin,
  );
}

export const DESKTOP = { width: 1280, height: 900 };
/** The narrowest phone the pages are made for. */
export const PHONE = { width: 360, height: 780 };

/**
 * Full-page screenshots at desktop and phone width (test-results/<name>-desktop|phone-….png),
 * checking on the phone that nothing needs sideways scrolling. Leaves the page at desktop width.
 */
export async function screenshotsAt(page: Page, name: string): Promise<void> {
  for (const [label, size] of [
    ["phone", PHONE],
    ["desktop", DESKTOP],
  ] as const) {
    await page.setViewportSize(size);
    if (label === "phone") {
      expect(
        await page.evaluate(() => document.documentElement.scrollWidth),
        `${name} scrolls sideways on a ${PHONE.width}-pixel phone`,
      ).toBeLessThanOrEqual(PHONE.width);
    }
    const path = await screenshotPath(`${name}-${label}`);
    await page.screenshot({ path, fullPage: true });
  }
}

/** axe-core (from the npm package, injected by @axe-core/playwright): no serious or critical issue. */
export async function expectAccessible(page: Page, name: string): Promise<void> {
  const result = await new AxeBuilder({ page }).analyze();
  const severe = result.violations
    .filter((violation) => violation.impact === "serious" || violation.impact === "critical")
    .map(
      (violation) =>
        `${violation.id} (${violation.impact}): ${violation.help} — ${violation.nodes
          .slice(0, 3)
          .map((node) => node.target.join(" "))
          .join(", ")}`,
    );
  expect(severe, `accessibility of ${name}`).toEqual([]);
}
