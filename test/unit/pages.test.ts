import type { Request } from "express";
import jsQRModule from "jsqr";
import { describe, expect, it } from "vitest";
import { parseServiceConfig } from "../../api/config/serviceConfig.ts";
import { htmlText } from "../../api/html/safeHtml.ts";
import { buildOffer, type Offer } from "../../api/offer/buildOffer.ts";
import { pageCsp } from "../../api/pages/layout.ts";
import { paymentUri, qrCodeSvg } from "../../api/pages/paymentQrCode.ts";
import { intakeMailbox, renderHomePage } from "../../api/pages/renderHomePage.ts";
import { parseInput } from "../../api/schemas/parseInput.ts";
import { verifyPageForm } from "../../api/schemas/pastedReceipt.ts";
import { routeClass } from "../../api/web/middleware/rateLimit.ts";

// jsqr is CommonJS typed as an ES module: its default export is the function's `default`.
const jsQR = jsQRModule.default;

/** The pieces of the pages that need no server: the payment QR code, the home page, the policy. */

const config = parseServiceConfig({
  RPC_URL: "http://127.0.0.1:8545",
  DATABASE_URL: "postgres://postgres@127.0.0.1:5432/test",
  PAY_TO: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
  PAYOUT_PRIVATE_KEY: `0x${"11".repeat(32)}`,
  RECEIPT_SIGNER_PRIVATE_KEY: `0x${"22".repeat(32)}`,
  FACILITATOR_PRIVATE_KEY: `0x${"33".repeat(32)}`,
});
const offer = buildOffer(config);

/** The dark modules of qrcode's SVG (its one stroked path), as a grid. */
function modulesOf(svg: string): boolean[][] {
  const size = Number(/viewBox="0 0 (\d+) \d+"/.exec(svg)?.[1]);
  const path = /<path stroke="#000000" d="([^"]+)"/.exec(svg)?.[1] ?? "";
  const grid = Array.from({ length: size }, () => new Array<boolean>(size).fill(false));
  let x = 0;
  let y = 0;
  for (const [, command, first, second] of path.matchAll(/([Mmh])([\d.]+)(?: ([\d.]+))?/g)) {
    const a = Number(first);
    if (command === "M") [x, y] = [a, Math.floor(Number(second))];
    else if (command === "m") x += a;
    else {
      for (let column = x; column < x + a; column += 1) (grid[y] as boolean[])[column] = true;
      x += a;
    }
  }
  return grid;
}

/** The grid drawn black on white, `scale` pixels a module, and read back by jsQR. */
function decode(grid: boolean[][], scale = 4): string | undefined {
  const side = grid.length * scale;
  const pixels = new Uint8ClampedArray(side * side * 4).fill(255);
  grid.forEach((row, rowIndex) => {
    row.forEach((dark, column) => {
      if (!dark) return;
      for (let dy = 0; dy < scale; dy += 1) {
        for (let dx = 0; dx < scale; dx += 1) {
          const at = ((rowIndex * scale + dy) * side + column * scale + dx) * 4;
          pixels.fill(0, at, at + 3);
        }
      }
    });
  });
  return jsQR(pixels, side, side)?.data;
}

describe("the payment QR code", () => {
  const request = {
    usdcContract: config.chain.usdcAddress,
    chainId: 8453,
    payTo: config.chain.payTo,
    amountAtomic: "10123456",
  };

  it("is an EIP-681 transfer of the token, to pay_to, for the exact atomic amount", () => {
    expect(paymentUri(request)).toBe(
      "ethereum:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913@8453/transfer" +
        "?address=0x70997970C51812dc3A010C7d01b50e0d17dc79C8&uint256=10123456",
    );
    expect(() => paymentUri({ ...request, amountAtomic: "10.123456" })).toThrow(RangeError);
  });

  it("draws that URI as inline SVG that a QR reader decodes, labelled for screen readers", async () => {
    const uri = paymentUri(request);
    const text = htmlText(await qrCodeSvg(uri, `Pay "10.123456" USDC <now> & $1`));
    expect(text).toMatch(
      /^<svg role="img" aria-label="Pay &quot;10\.123456&quot; USDC &lt;now&gt; &amp; \$1" xmlns=/,
    );
    expect(text).not.toMatch(/<script|style=|href=/);
    expect(decode(modulesOf(text))).toBe(uri);
  });
});

describe("the home page", () => {
  const view = (changed: Partial<Offer> = {}) =>
    renderHomePage({
      offer: { ...offer, ...changed },
      totals: {
        completedPayouts: 2,
        uniquePayoutAddresses: 2,
        received: 20_000_000n,
        paidOut: 2_000_000n,
        firstCompletedAt: new Date("2025-01-01T00:00:00Z"),
        lastCompletedAt: new Date("2025-01-02T03:04:05Z"),
      },
      latest: [],
      x402Enabled: true,
      form: { values: {}, errors: [], mailEnabled: false },
    });

  it("links the agent interfaces only when the offer lists them", () => {
    const {
      mcp: _mcp,
      a2a_agent_card: _card,
      a2a_jsonrpc: _rpc,
      ...plain
    } = offer.endpoints as Record<string, string>;
    const without = view({ endpoints: plain as Offer["endpoints"] });
    expect(without).not.toMatch(/MCP|A2A/);
    const withAgents = view({
      endpoints: {
        ...offer.endpoints,
        mcp: "POST /mcp",
        a2a_agent_card: "GET /.well-known/agent-card.json",
      } as Offer["endpoints"],
    });
    expect(withAgents).toContain(`MCP (agent tools): <code>POST ${offer.site}/mcp</code>`);
    expect(withAgents).toContain('<a href="/.well-known/agent-card.json">A2A agent card</a>');
  });

  it("shows the mail way only when the offer's mail instructions name a mailbox", () => {
    expect(intakeMailbox(offer)).toBeNull();
    expect(view()).not.toContain("By email");
    const mail = "Send a message to claims@pay.example with your payout address in the body.";
    expect(intakeMailbox({ email: mail })).toBe("claims@pay.example");
    const page = view({ email: mail });
    expect(page).toContain("By email");
    expect(page).toContain('<a href="mailto:claims@pay.example">');
  });

  it("says what is sold, for how much, and links every document", () => {
    const page = view();
    expect(page).toContain(offer.offer);
    expect(page).toMatch(/10 USDC<\/strong><span>you pay/);
    for (const href of ["/ledger", "/docs", "/llms.txt", "/openapi.json", "/graphql", "/verify"]) {
      expect(page).toContain(`href="${href}"`);
    }
    expect(page).toContain('action="/claims"');
    expect(page).toContain('action="/payments"');
  });
});

describe("the pages' policy and forms", () => {
  it("allows no inline script or style but the page's own, and connects only with a script", () => {
    const plain = pageCsp();
    expect(plain).toMatch(
      /^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/]+=*'; img-src 'self'/,
    );
    expect(plain).not.toMatch(/unsafe|script-src|connect-src/);
    const scripted = pageCsp({ scriptNonce: "abc" });
    expect(scripted).toContain("script-src 'nonce-abc'; connect-src 'self'");
    expect(scripted).toContain("trusted-types 'none'");
    expect(scripted).not.toMatch(/unsafe/);
  });

  it("counts the claim form as a write and the receipt check as a read", () => {
    const request = (method: string, path: string) => ({ method, path, body: {} }) as Request;
    expect(routeClass(request("POST", "/claims"))).toBe("write");
    expect(routeClass(request("POST", "/verify"))).toBe("read");
    expect(routeClass(request("GET", "/claims/clm_x"))).toBe("read");
  });

  it("reads a pasted receipt as downloaded, inside an x402 answer, or not at all", () => {
    const receipt = { message: "m", signature: "0x12" };
    const read = (text: string) => parseInput(verifyPageForm, { receipt: text });
    expect(read(JSON.stringify({ ...receipt, claim_id: "clm_x", signer: "0x" }))).toEqual({
      ok: true,
      value: { receipt },
    });
    expect(read(JSON.stringify({ claim_id: "clm_x", receipt }))).toEqual({
      ok: true,
      value: { receipt },
    });
    expect(read("not json")).toEqual({
      ok: false,
      errors: [{ field: "receipt", message: expect.stringMatching(/^is not JSON/) }],
    });
    expect(read("   ")).toMatchObject({ ok: false, errors: [{ field: "receipt" }] });
  });
});
