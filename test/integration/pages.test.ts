import { readFile } from "node:fs/promises";
import fc from "fast-check";
import jsQRModule from "jsqr";
import type { Page, Response as PageResponse } from "playwright-core";
import { PNG } from "pngjs";
import { type Address, type Hex, verifyMessage } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BASE_USDC_ADDRESS } from "../../contracts-abi/usdc.ts";
import { startBrowser, type TestBrowser } from "../support/browser.ts";
import { type CompletedClaim, completeClaims } from "../support/completedClaims.ts";
import {
  expectAccessible,
  foreignRequests,
  screenshotsAt,
  type WatchedPage,
  watchedPage,
} from "../support/pages.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { atomic } from "../support/usdc.ts";

// jsqr is CommonJS typed as an ES module: its default export is the function's `default`.
const jsQR = jsQRModule.default;

/**
 * The pages for people in real headless Chromium, on the real stack (Anvil, PostgreSQL, Ponder,
 * the service): the home page, the start-a-claim form, the live claim page with its QR code,
 * the receipt checker and the payment page; bad input on each; accessibility (axe) and
 * screenshots at desktop and phone width (test-results/).
 */

/** A hostile agent name: markup, quotes, an ampersand; it must read as text on every page. */
const HOSTILE = `<img src=x onerror=alert(1)><b>bold</b>"'&amp;`;
const WRITES_PER_WINDOW = 30;

let browser: TestBrowser;
let stack: Stack;
let origin: string;
/** A claim completed through the API before any page is opened, with the hostile name. */
let done: CompletedClaim;
let clients = 0;

beforeAll(async () => {
  browser = await startBrowser();
  stack = await startStack({
    serviceEnv: {
      // Limits on, so the form's POST is seen counted as a write; each limit test has its own
      // client address (X-Forwarded-For from loopback), the browser is 127.0.0.1.
      RATE_LIMIT_ENABLED: "true",
      TRUST_PROXY: "loopback",
      RATE_LIMIT_WRITES: String(WRITES_PER_WINDOW),
      RATE_LIMIT_READS: "100000",
      RATE_LIMIT_WINDOW_SECONDS: "3600",
      EXPIRY_GRACE_SECONDS: "0",
      EXPIRY_INTERVAL_MS: "100",
    },
  });
  origin = new URL(stack.service.url).origin;
  [done] = (await completeClaims(stack, [{ agentName: HOSTILE }])) as [CompletedClaim];
});

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

const url = (path: string) => `${stack.service.url}${path}`;
const freshAddress = () => privateKeyToAccount(generatePrivateKey()).address;

/** A client address of its own (TEST-NET-3), sent as a proxy in front would. */
function newClient(): string {
  clients += 1;
  return `203.0.113.${clients}`;
}

/** What must hold of every page a test opened: nothing ran, failed, popped up or came from elsewhere. */
function expectQuiet({ seen }: WatchedPage) {
  expect(seen.dialogs).toEqual([]);
  expect(seen.errors).toEqual([]);
  expect(foreignRequests(seen.requests, origin)).toEqual([]);
}

/** The page's markup shows the hostile name as text, and none of its markup took effect. */
async function expectHostileAsText(page: Page) {
  expect(await page.locator("main").textContent()).toContain(HOSTILE);
  expect(await page.locator("main img, main b").count()).toBe(0);
}

function cspOf(response: PageResponse | null): string {
  return response?.headers()["content-security-policy"] ?? "";
}

/** A form POST as a browser on this site sends it (fetch adds no Sec-Fetch-Site of its own). */
function postForm(
  path: string,
  fields: Record<string, string>,
  headers: Record<string, string> = {},
) {
  return fetch(url(path), {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(fields).toString(),
  });
}

describe("GET /", () => {
  it("tells people what is sold, the ways to earn, live figures and every link", async () => {
    const watched = await watchedPage(browser);
    const { page } = watched;
    const response = await page.goto(url("/"));
    expect(response?.status()).toBe(200);
    const csp = cspOf(response);
    expect(csp).toMatch(/^default-src 'none'; style-src 'sha256-/);
    expect(csp).not.toMatch(/unsafe|script-src/);

    const offer = (await stack.api("/api/info")).body;
    const main = (await page.locator("main").textContent()) ?? "";
    expect(main).toContain(offer.offer as string);
    expect(main).toMatch(/10 USDC\s*you pay/);
    expect(main).toMatch(/1 USDC\s*you get back/);
    expect(await page.getByRole("heading", { name: "In a browser" }).count()).toBe(1);
    expect(await page.getByRole("heading", { name: /With x402/ }).count()).toBe(1);
    // Mail is not enabled on this deployment: not offered. The agent interfaces are.
    expect(await page.getByRole("heading", { name: "By email" }).count()).toBe(0);
    expect(main).toMatch(/MCP \(agent tools\)/);
    expect(main).toMatch(/A2A agent card/);

    const ledger = await stack.api<{ entries: { agent_name: string | null }[] }>("/api/ledger");
    expect(await page.locator("#completed-payouts").textContent()).toBe(
      String(ledger.body.entries.length),
    );
    expect(await page.locator("td.agent").first().textContent()).toBe(
      ledger.body.entries[0]?.agent_name,
    );
    await expectHostileAsText(page);
    for (const href of ["/ledger", "/docs", "/llms.txt", "/openapi.json", "/graphql", "/verify"]) {
      expect(await page.locator(`a[href="${href}"]`).count(), href).toBeGreaterThan(0);
    }
    await expectAccessible(page, "the home page");
    await screenshotsAt(page, "home");
    expectQuiet(watched);
    await page.close();
  });

  it("gives the offer document to a client that asks for JSON", async () => {
    const asJson = await stack.api("/", { headers: { accept: "application/json" } });
    expect(asJson.status).toBe(200);
    expect(asJson.body).toEqual((await stack.api("/api/info")).body);
    const asAnything = await fetch(url("/"), { headers: { accept: "*/*" } });
    expect(asAnything.headers.get("content-type")).toMatch(/^text\/html/);
    expect(asAnything.headers.get("vary")).toMatch(/Accept/);
  });
});

describe("a claim in a browser, end to end", () => {
  // A whole claim with two accessibility passes and four screenshots: past a minute on a busy
  // machine (it timed out once in CI at 60 s).
  it("starts from the form, shows what to pay, and completes by itself once paid", async () => {
    const watched = await watchedPage(browser);
    const { page } = watched;
    await browser.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin });
    await page.goto(url("/"));
    const payoutAddress = freshAddress();
    await page.getByLabel(/^Payout address/).fill(payoutAddress);
    await page.getByLabel(/^Name on the ledger/).fill(HOSTILE);
    await page.getByLabel(/^Email/).fill("person@example.com");
    const [created] = await Promise.all([
      page.waitForResponse((r) => r.url() === url("/claims") && r.request().method() === "POST"),
      page.getByRole("button", { name: "Start the claim" }).click(),
    ]);
    expect(created.status()).toBe(303);
    await page.waitForURL(/\/claims\/clm_[A-Za-z0-9_-]+$/);
    const claimId = new URL(page.url()).pathname.split("/").pop() as string;
    const pageResponse = await page.reload();
    const csp = cspOf(pageResponse);

    // Where it stands, and everything a person needs to pay, read from the page alone.
    expect(await page.locator('[aria-current="step"]').textContent()).toMatch(/^Awaiting payment/);
    const amount = ((await page.locator("#amount").textContent()) ?? "").trim();
    const payTo = ((await page.locator("#pay-to").textContent()) ?? "").trim();
    expect(amount).toMatch(/^10\.\d{6}$/);
    expect(payTo).toBe(stack.chain.payTo.address);
    expect(await page.locator("#network").textContent()).toBe("Base (chain id 8453)");
    const warning = (await page.locator("#exchange-warning").textContent()) ?? "";
    expect(warning).toContain(`exactly ${amount} USDC`);
    expect(warning).toContain(BASE_USDC_ADDRESS);
    expect(await page.locator("#agent-name").textContent()).toBe(HOSTILE);
    await expectHostileAsText(page);

    // The script runs under this response's nonce, and nothing else may run.
    const nonce = /script-src 'nonce-([^']+)'/.exec(csp)?.[1];
    expect(nonce).toBeTruthy();
    expect(csp).not.toMatch(/unsafe/);
    expect(await page.evaluate(() => document.scripts[0]?.nonce)).toBe(nonce);
    await expect.poll(() => page.locator("#live-status").textContent()).toMatch(/updates itself/);

    // Copy buttons copy exactly what is shown.
    await page.getByRole("button", { name: "Copy the amount" }).click();
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe(amount);

    // The QR code, as the screen shows it, is the EIP-681 request for exactly this payment.
    const qr = PNG.sync.read(await page.locator("figure.qr svg").screenshot());
    const decoded = jsQR(new Uint8ClampedArray(qr.data), qr.width, qr.height);
    expect(decoded?.data).toBe(
      `ethereum:${BASE_USDC_ADDRESS}@8453/transfer?address=${payTo}&uint256=${atomic(amount)}`,
    );
    await expectAccessible(page, "the claim page awaiting payment");
    await screenshotsAt(page, "claim-awaiting-payment");

    // Pay what the page says, from a wallet that is not the payout address.
    const paymentTx = await stack.chain.transferUsdc(
      stack.chain.user(1),
      payTo as Address,
      atomic(amount),
    );
    await stack.mine(2);
    await page.locator('#claim[data-status="completed"]').waitFor({ timeout: 45_000 });

    const claim = (await stack.api(`/api/claims/${claimId}`)).body;
    expect(claim.status).toBe("completed");
    const explorer = stack.service.config.chain.explorerUrl;
    expect(await page.locator("#payout-tx a").getAttribute("href")).toBe(
      `${explorer}/tx/${claim.payout_tx}`,
    );
    expect(await page.locator("main").textContent()).toContain(paymentTx);
    const message = (await page.locator("#receipt-message").textContent()) ?? "";
    expect(message).toContain(`Claim: ${claimId}`);
    expect(message).toContain(`Holder: ${payoutAddress}`);
    expect(message).toContain(`Payout tx: ${claim.payout_tx}`);

    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.locator("#receipt-download").click(),
    ]);
    expect(download.suggestedFilename()).toBe("receipt.json");
    const receipt = JSON.parse(await readFile((await download.path()) as string, "utf8"));
    expect(receipt.message).toBe(message);
    expect(receipt.signer).toBe(stack.chain.receiptSigner.address);
    expect(
      await verifyMessage({
        address: receipt.signer as Address,
        message: receipt.message,
        signature: receipt.signature as Hex,
      }),
    ).toBe(true);

    const completed = await page.reload();
    expect(cspOf(completed)).not.toMatch(/script-src/);
    await expectHostileAsText(page);
    await expectAccessible(page, "the completed claim page");
    await screenshotsAt(page, "claim-completed");
    expectQuiet(watched);
    await page.close();
  }, 120_000);

  it("works without JavaScript: errors beside their fields, values kept, then a refresh link", async () => {
    const withoutScripts = await startBrowser(undefined, { javaScriptEnabled: false });
    const watched = await watchedPage(withoutScripts);
    const { page } = watched;
    await page.goto(url("/"));
    const typed = { payout_address: "0x123", agent_name: HOSTILE, email: "not-an-email" };
    await page.getByLabel(/^Payout address/).fill(typed.payout_address);
    await page.getByLabel(/^Name on the ledger/).fill(typed.agent_name);
    await page.getByLabel(/^Email/).fill(typed.email);
    const claimsBefore = await stack.claimCount();
    const [refused] = await Promise.all([
      page.waitForResponse((r) => r.url() === url("/claims")),
      page.getByRole("button", { name: "Start the claim" }).click(),
    ]);
    expect(refused.status()).toBe(400);
    await page.waitForLoadState();

    // The same checks and the same words as POST /api/claims, beside each field.
    const api = await stack.api<{ errors: { field: string; message: string }[] }>("/api/claims", {
      body: typed,
    });
    expect(api.status).toBe(400);
    expect(api.body.errors.map((error) => error.field).sort()).toEqual(["email", "payout_address"]);
    for (const error of api.body.errors) {
      expect(await page.locator(`#${error.field}-error`).textContent()).toBe(error.message);
      expect(await page.locator(`#${error.field}`).getAttribute("aria-invalid")).toBe("true");
    }
    for (const [field, value] of Object.entries(typed)) {
      expect(await page.locator(`#${field}`).inputValue()).toBe(value);
    }
    expect(await page.locator("main img, main b").count()).toBe(0);
    expect(await stack.claimCount()).toBe(claimsBefore);

    await page.locator("#payout_address").fill(freshAddress());
    await page.locator("#email").fill("");
    await page.getByRole("button", { name: "Start the claim" }).click();
    await page.waitForURL(/\/claims\/clm_/);
    expect(await page.locator("#live-status").textContent()).toMatch(/does not update itself/);
    expect(await page.getByRole("link", { name: "Refresh" }).getAttribute("href")).toBe(
      new URL(page.url()).pathname,
    );
    expect(await page.locator("button[data-copy]").first().isVisible()).toBe(false);
    expect(await page.locator("#agent-name").textContent()).toBe(HOSTILE);
    expectQuiet(watched);
    await withoutScripts.close();
  });

  it("shows a refused form accessibly, on a phone too", async () => {
    const watched = await watchedPage(browser);
    const { page } = watched;
    await page.goto(url("/"));
    await page.getByLabel(/^Payout address/).fill("0xnot-an-address");
    await page.getByLabel(/^Email/).fill("@");
    await page.getByRole("button", { name: "Start the claim" }).click();
    await page.locator("#payout_address-error").waitFor();
    await expectAccessible(page, "the form with errors");
    await screenshotsAt(page, "claim-form-errors");
    expectQuiet(watched);
    await page.close();
  });

  it("says so for an expired claim, offers a new one, and asks for no payment", async () => {
    const created = await stack.createClaim(freshAddress());
    await stack.service.sql`
      update app.claims set expires_at = now() - interval '1 minute'
      where id = ${created.claim_id}`;
    await stack.untilClaimStatus(created.claim_id, "expired");
    const watched = await watchedPage(browser);
    const { page } = watched;
    const response = await page.goto(url(`/claims/${created.claim_id}`));
    expect(response?.status()).toBe(200);
    expect(cspOf(response)).not.toMatch(/script-src/);
    expect(await page.locator('[role="status"]').textContent()).toMatch(/The claim has expired/);
    expect(await page.getByRole("link", { name: "Start a new claim" }).count()).toBe(1);
    expect(await page.locator("#amount, figure.qr").count()).toBe(0);
    await expectAccessible(page, "an expired claim");
    await screenshotsAt(page, "claim-expired");
    expectQuiet(watched);
    await page.close();
  });
});

describe("bad input", () => {
  it.each([
    ["a malformed claim id", "/claims/not-a-claim"],
    ["an unknown claim id", "/claims/clm_AAAAAAAAAAAAAAAAAAAAAA"],
    ["markup in the path", `/claims/${encodeURIComponent("<script>alert(1)</script>")}`],
  ])("answers %s with a 404 page, or problem+json to a client asking JSON", async (_, path) => {
    const forPeople = await fetch(url(path), { headers: { accept: "text/html" } });
    const text = await forPeople.text();
    expect(forPeople.status).toBe(404);
    expect(forPeople.headers.get("content-type")).toMatch(/^text\/html/);
    expect(text).toContain("<h1>No such claim</h1>");
    expect(text).toContain('href="/#start"');
    expect(text).not.toContain("<script>alert");
    const forClients = await stack.api(path, { headers: { accept: "application/json" } });
    expect(forClients.status).toBe(404);
    expect(forClients.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(forClients.body.type).toBe("/problems/claim_not_found");
  });

  it.each([
    ["a malformed tx hash", "/payments/0x1234", "/problems/not_found"],
    ["an unknown tx hash", `/payments/0x${"ab".repeat(32)}`, "/problems/tx_not_found"],
  ])("answers %s with a 404 page, or problem+json", async (_, path, type) => {
    const forPeople = await fetch(url(path));
    expect(forPeople.status).toBe(404);
    expect(forPeople.headers.get("content-type")).toMatch(/^text\/html/);
    expect(await forPeople.text()).toContain('action="/payments"');
    const forClients = await stack.api(path, { headers: { accept: "application/json" } });
    expect(forClients.status).toBe(404);
    expect(forClients.body.type).toBe(type);
  });

  it("shows the 404 page for people, accessible", async () => {
    const watched = await watchedPage(browser);
    const response = await watched.page.goto(url("/claims/not-a-claim"));
    expect(response?.status()).toBe(404);
    await expectAccessible(watched.page, "the unknown-claim page");
    await screenshotsAt(watched.page, "claim-not-found");
    await watched.page.close();
  });

  it("refuses forms from other sites and bodies that are not forms, creating nothing", async () => {
    const before = await stack.claimCount();
    const fields = { payout_address: freshAddress() };
    const crossSite = await postForm("/claims", fields, { "sec-fetch-site": "cross-site" });
    expect(crossSite.status).toBe(403);
    expect(await crossSite.text()).toContain("only be sent from this service");
    const foreignOrigin = await postForm("/claims", fields, { origin: "https://evil.example" });
    expect(foreignOrigin.status).toBe(403);
    // A sandboxed frame or a data: page on another site sends Origin: null.
    const nullOrigin = await postForm("/claims", fields, { origin: "null" });
    expect(nullOrigin.status).toBe(403);
    const json = await fetch(url("/claims"), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(fields),
    });
    expect(json.status).toBe(415);
    const huge = await postForm("/claims", { ...fields, agent_name: "x".repeat(20_000) });
    expect(huge.status).toBe(413);
    expect(huge.headers.get("content-type")).toMatch(/^text\/html/);
    expect(await stack.claimCount()).toBe(before);

    // From this site's own page (Sec-Fetch-Site, or its Origin), or not from a browser.
    const fromOurPages: Record<string, string>[] = [
      { "sec-fetch-site": "same-origin" },
      { origin },
      {},
    ];
    for (const headers of fromOurPages) {
      const ok = await postForm("/claims", { payout_address: freshAddress() }, headers);
      expect(ok.status).toBe(303);
      expect(ok.headers.get("location")).toMatch(/^\/claims\/clm_/);
    }
    expect(await stack.claimCount()).toBe(before + fromOurPages.length);
  });

  it("counts the form's POST as a write, and the receipt check's as a read", async () => {
    // Refused forms create nothing, but each is a write. (On a loaded machine a count can
    // time out, and the limiter lets a few requests through uncounted: never fewer than the
    // limit pass, and the limit is reached.)
    const writer = newClient();
    const statuses: number[] = [];
    while (statuses.length < 3 * WRITES_PER_WINDOW && statuses.at(-1) !== 429) {
      const response = await postForm(
        "/claims",
        { payout_address: "nope" },
        { "x-forwarded-for": writer },
      );
      statuses.push(response.status);
    }
    expect(statuses.at(-1)).toBe(429);
    expect(statuses.slice(0, -1).every((status) => status === 400)).toBe(true);
    expect(statuses.length).toBeGreaterThan(WRITES_PER_WINDOW);

    const reader = newClient();
    for (let index = 0; index <= WRITES_PER_WINDOW; index += 1) {
      const response = await postForm("/verify", { receipt: "{}" }, { "x-forwarded-for": reader });
      expect(response.status).toBe(400);
    }
  });
});

describe("random input at every page", () => {
  let fuzzClients = 0;
  const text = fc.string({ maxLength: 120 });
  const hex = (length: number) =>
    fc.string({
      unit: fc.constantFrom(..."0123456789abcdefABCDEF"),
      minLength: length,
      maxLength: length,
    });
  const parameter = fc.oneof(
    text.filter((value) => value.length > 0),
    hex(64).map((digits) => `0x${digits}`),
    fc.constant("clm_AAAAAAAAAAAAAAAAAAAAAA"),
  );
  const formBody = fc.oneof(
    fc
      .dictionary(
        fc.constantFrom("payout_address", "agent_name", "email", "receipt", "tx_hash", "x"),
        fc.oneof(
          text,
          hex(40).map((digits) => `0x${digits}`),
          // JSON text, not String(value): an object whose "toString" key is data cannot be turned into a string.
          fc.jsonValue().map((value) => JSON.stringify(value)),
        ),
      )
      .map((fields) => new URLSearchParams(fields).toString()),
    text,
  );
  const pages = [
    { method: "POST", name: "/claims", path: () => "/claims" },
    { method: "POST", name: "/verify", path: () => "/verify" },
    {
      method: "GET",
      name: "/claims/{x}",
      path: (value: string) => `/claims/${encodeURIComponent(value)}`,
    },
    {
      method: "GET",
      name: "/payments/{x}",
      path: (value: string) => `/payments/${encodeURIComponent(value)}`,
    },
    {
      method: "GET",
      name: "/verify?claim_id=x",
      path: (value: string) => `/verify?claim_id=${encodeURIComponent(value)}`,
    },
    {
      method: "GET",
      name: "/payments?tx_hash=x",
      path: (value: string) => `/payments?tx_hash=${encodeURIComponent(value)}`,
    },
  ];

  it.each(pages)(
    "$method $name never answers 5xx, and answers JSON only to who asks",
    async (page) => {
      await fc.assert(
        fc.asyncProperty(
          parameter,
          formBody,
          fc.constantFrom("application/x-www-form-urlencoded", "application/json", "text/plain"),
          fc.constantFrom("text/html", "application/json", "*/*"),
          async (value, body, contentType, accept) => {
            fuzzClients += 1;
            const response = await fetch(url(page.path(value)), {
              method: page.method,
              redirect: "manual",
              headers: {
                accept,
                // Each request a client of its own: the write limit is not what is tested here.
                "x-forwarded-for": `10.77.${Math.floor(fuzzClients / 250)}.${fuzzClients % 250}`,
                ...(page.method === "POST" ? { "content-type": contentType } : {}),
              },
              ...(page.method === "POST" ? { body } : {}),
            });
            await response.arrayBuffer();
            expect(response.status).toBeLessThan(500);
            const type = response.headers.get("content-type") ?? "";
            // A JSON body never reaches a page: the API's parser refuses it first (problem+json).
            const jsonPost = page.method === "POST" && contentType === "application/json";
            if (response.status >= 400 && accept === "text/html" && !jsonPost) {
              expect(type).toMatch(/^text\/html/);
            }
            if (response.status >= 400 && type.includes("json")) {
              expect(type).toMatch(/^application\/problem\+json/);
            }
          },
        ),
        { numRuns: 25 },
      );
    },
  );
});

describe("the receipt checker", () => {
  async function check(page: Page, pasted: string) {
    await page.locator("#receipt").fill(pasted);
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url() === url("/verify") && r.request().method() === "POST"),
      page.getByRole("button", { name: "Check" }).click(),
    ]);
    await page.waitForLoadState();
    return response.status();
  }

  /** The page's verdict and POST /api/receipts/verify's for the same receipt agree. */
  async function expectSameVerdictAsApi(
    page: Page,
    { message, signature }: { message: string; signature: string },
  ) {
    const api = (await stack.api("/api/receipts/verify", { body: { message, signature } })).body;
    const verdict = page.locator("#verdict");
    expect(await verdict.getAttribute("data-genuine")).toBe(String(api.genuine));
    expect(await verdict.getAttribute("data-current")).toBe(String(api.current));
    expect(await verdict.getAttribute("data-reason")).toBe(api.reason);
    return api;
  }

  it("says genuine for a real receipt, and not genuine for a tampered or forged one", async () => {
    const watched = await watchedPage(browser);
    const { page } = watched;
    const response = await page.goto(url(`/verify?claim_id=${done.claimId}`));
    expect(response?.status()).toBe(200);
    expect(await page.locator("#verdict-text").textContent()).toMatch(/^Genuine/);
    const real = JSON.parse(await page.locator("#receipt").inputValue());
    expect(real.claim_id).toBe(done.claimId);
    const genuine = await expectSameVerdictAsApi(page, real);
    expect(genuine).toMatchObject({ genuine: true, current: true });
    expect(await page.locator('#verdict dd[data-state="on_chain"]').count()).toBe(2);
    await expectAccessible(page, "the receipt checker, genuine");
    await screenshotsAt(page, "verify-genuine");

    // The whole receipt.json pasted back, as a person would.
    expect(await check(page, JSON.stringify(real, null, 2))).toBe(200);
    expect(await page.locator("#verdict").getAttribute("data-current")).toBe("true");

    const tampered = {
      ...real,
      message: (real.message as string).replace(
        /Holder: 0x[0-9a-fA-F]{40}/,
        `Holder: ${freshAddress()}`,
      ),
    };
    expect(await check(page, JSON.stringify(tampered))).toBe(200);
    expect(await page.locator("#verdict-text").textContent()).toMatch(/^Not genuine/);
    expect(await expectSameVerdictAsApi(page, tampered)).toMatchObject({ genuine: false });
    await screenshotsAt(page, "verify-tampered");

    const forger = privateKeyToAccount(generatePrivateKey());
    const forged = {
      message: real.message as string,
      signature: await forger.signMessage({ message: real.message as string }),
    };
    expect(await check(page, JSON.stringify(forged))).toBe(200);
    expect(await page.locator("#verdict-text").textContent()).toMatch(/^Not genuine/);
    expect(await expectSameVerdictAsApi(page, forged)).toMatchObject({
      reason: "signed_by_another_key",
    });
    expectQuiet(watched);
    await page.close();
  });

  it("gives a clear verdict, never a 5xx, for what is not a receipt", async () => {
    const watched = await watchedPage(browser);
    const { page } = watched;
    await page.goto(url("/verify"));
    expect(await check(page, "this is not JSON <b>at all</b>")).toBe(400);
    expect(await page.locator("#receipt-error").textContent()).toMatch(/^is not JSON/);
    expect(await page.locator("#receipt").getAttribute("aria-invalid")).toBe("true");
    expect(await page.locator("#receipt").inputValue()).toBe("this is not JSON <b>at all</b>");
    expect(await page.locator("main b").count()).toBe(0);
    await expectAccessible(page, "the receipt checker, not JSON");
    await screenshotsAt(page, "verify-not-json");
    expectQuiet(watched);
    await page.close();

    for (const pasted of [
      "",
      "null",
      "[]",
      "{}",
      '"text"',
      '{"message":1}',
      "{",
      "x".repeat(15_000),
    ]) {
      const response = await postForm("/verify", { receipt: pasted });
      expect(response.status, pasted.slice(0, 20)).toBe(400);
      expect(await response.text()).toContain('id="verify-problem"');
    }
    const unknown = await fetch(url("/verify?claim_id=clm_AAAAAAAAAAAAAAAAAAAAAA"));
    expect(unknown.status).toBe(404);
    expect(await unknown.text()).toContain("No such claim");
  });
});

describe("the payment page", () => {
  it("answers the home page's search with the same explanation as the API", async () => {
    const watched = await watchedPage(browser);
    const { page } = watched;
    await page.goto(url("/"));
    await page.getByLabel("Transaction hash").fill(done.paymentTx);
    await page.getByRole("button", { name: "Look it up" }).click();
    await page.waitForURL(url(`/payments/${done.paymentTx}`));
    const api = await stack.api<{ summary: string; transfers: { explanation: string }[] }>(
      `/api/payments/${done.paymentTx}`,
    );
    expect(await page.locator("#summary").textContent()).toBe(api.body.summary);
    expect(await page.locator("main").textContent()).toContain(api.body.transfers[0]?.explanation);
    expect(await page.locator(`a[href="/claims/${done.claimId}"]`).count()).toBe(1);
    await expectAccessible(page, "the payment page");
    await screenshotsAt(page, "payment");

    const asJson = await stack.api(`/payments/${done.paymentTx}`, {
      headers: { accept: "application/json" },
    });
    expect(asJson.body).toEqual(api.body);

    await page.goto(url("/payments?tx_hash=0xnope"));
    expect(await page.locator("#tx_hash-error").textContent()).toMatch(/transaction hash/);
    expect(await page.locator("#tx_hash").inputValue()).toBe("0xnope");
    expectQuiet(watched);
    await page.close();
  });
});

describe("the shared layout", () => {
  it("frames the ledger too, with the hostile name as text", async () => {
    const watched = await watchedPage(browser);
    const { page } = watched;
    const response = await page.goto(url("/ledger"));
    expect(cspOf(response)).not.toMatch(/unsafe/);
    expect(await page.getByRole("navigation", { name: "Pages", exact: true }).count()).toBe(1);
    await expectHostileAsText(page);
    await expectAccessible(page, "the ledger");
    await screenshotsAt(page, "ledger-in-layout");
    expectQuiet(watched);
    await page.close();
  });
});
