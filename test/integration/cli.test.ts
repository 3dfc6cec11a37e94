import { execFile } from "node:child_process";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stripVTControlCharacters } from "node:util";
import { decodePaymentRequiredHeader, encodePaymentRequiredHeader } from "@x402/core/http";
import type { PaymentRequirements } from "@x402/core/types";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { readIndexerTables } from "../../api/chain/indexerSchema.ts";
import { migrationChecksum, readMigrations } from "../../api/db/migrate.ts";
import { ledgerResponse } from "../../api/schemas/ledger.ts";
import {
  claimResponse,
  offerResponse,
  paymentExplanationResponse,
  receiptResponse,
} from "../../api/schemas/responses.ts";
import packageJson from "../../package.json" with { type: "json" };
import { type RunningAnvil, startAnvil } from "../../scripts/devnet/anvil.ts";
import { runCli, runCliInTerminal } from "../support/cliProcess.ts";
import { callDevnetToken } from "../support/payouts.ts";
import { testServiceEnv } from "../support/service.ts";
import { type Stack, startStack } from "../support/stack.ts";
import { USDC } from "../support/usdc.ts";

/**
 * `pay-and-earn` as a user runs it (a child process; piped, and in a pseudo-terminal) against
 * the devnet: Anvil, PostgreSQL, Ponder and the service. One stack for the whole file.
 */

// Each `pay-and-earn` run is a Node process of its own (~0.7 s of CPU); a test of several took
// over the 60 s default in a whole `npm test` at load 8 (BENCHMARKS.md#test-suite).
vi.setConfig({ testTimeout: 150_000 });

let stack: Stack;
let otherChain: RunningAnvil;
let workDir: string;
/** Filled in as the earn tests go; later tests read them. */
const earned: { x402?: string; claim?: string; paymentTx?: string } = {};

const newAddress = () => privateKeyToAccount(generatePrivateKey()).address;

/** What every earner's command gets: the service's URL and a quick poll. */
function earnerEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { PAY_AND_EARN_URL: stack.service.url, PAY_AND_EARN_POLL_MS: "200", ...extra };
}

/** What an operator's shell holds: the service's own settings. */
function operatorEnv(overrides: Record<string, string> = {}): Record<string, string> {
  return testServiceEnv(stack.chain, stack.database.url, {
    PUBLIC_URL: stack.service.url,
    ...overrides,
  });
}

/** Output without its escape codes. */
const plain = stripVTControlCharacters;
const ESCAPE = "\u001b[";

/**
 * A service that lies: the real offer, but a 402 whose terms `change` alters. Counts the paid
 * retries it gets (a PAYMENT-SIGNATURE means the client signed) and hangs up on them; with
 * `failClaimReads`, every GET of a claim is a 503.
 */
async function startLyingService(
  change: (terms: PaymentRequirements) => PaymentRequirements,
  options: {
    failClaimReads?: boolean;
    /** Rewrites a JSON answer of the real service (the offer, a claim, a problem …). */
    rewrite?: (
      request: { method: string; url: string },
      answer: { status: number; body: Record<string, unknown> },
    ) => { status: number; body: unknown };
  } = {},
) {
  let signedRetries = 0;
  const server: Server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    if (
      options.failClaimReads &&
      request.method === "GET" &&
      request.url?.startsWith("/api/claims/")
    ) {
      response.writeHead(503, { "content-type": "application/problem+json" });
      response.end(
        JSON.stringify({
          type: "/problems/temporarily_unavailable",
          title: "Unavailable",
          status: 503,
          detail: "Try again later.",
        }),
      );
      return;
    }
    if (request.headers["payment-signature"]) {
      signedRetries += 1;
      // It takes the signed payment and never answers: the client cannot know what happened.
      request.socket.destroy();
      return;
    }
    const real = await fetch(`${stack.service.url}${request.url}`, {
      method: request.method ?? "GET",
      headers: { "content-type": "application/json" },
      ...(request.method === "POST" ? { body: Buffer.concat(chunks) } : {}),
    });
    const header = real.headers.get("payment-required");
    if (real.status === 402 && header) {
      const terms = decodePaymentRequiredHeader(header);
      const lie = { ...terms, accepts: terms.accepts.map(change) };
      response.writeHead(402, {
        "content-type": "application/json",
        "payment-required": encodePaymentRequiredHeader(lie),
      });
      response.end(
        JSON.stringify({
          type: "/problems/payment_required",
          title: "Payment required",
          status: 402,
        }),
      );
      return;
    }
    const text = await real.text();
    const answer = options.rewrite
      ? options.rewrite(
          { method: request.method ?? "GET", url: request.url ?? "/" },
          { status: real.status, body: JSON.parse(text) },
        )
      : { status: real.status, body: JSON.parse(text) };
    response.writeHead(answer.status, { "content-type": "application/json" });
    response.end(JSON.stringify(answer.body));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    signedRetries: () => signedRetries,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

beforeAll(async () => {
  [stack, otherChain] = await Promise.all([
    startStack({ blockTimeSeconds: 1, serviceEnv: { MATCHING_VARIANT: "A" } }),
    startAnvil({ port: 0, chainId: 1 }),
  ]);
  workDir = await mkdtemp(join(tmpdir(), "pay-and-earn-cli-"));
});

afterAll(async () => {
  await otherChain?.stop();
  await stack?.stop();
});

describe("pay-and-earn earn", () => {
  it("earns with x402 and --json: one JSON document, the payout on chain, a receipt that checks", async () => {
    const payer = stack.chain.user(0);
    const holder = newAddress();
    const run = await runCli(
      ["earn", "--via", "x402", "--payout", holder, "--agent-name", "cli-x402", "--json"],
      earnerEnv({ PAYER_PRIVATE_KEY: payer.privateKey }),
    );
    expect(run.code, run.stderr).toBe(0);
    const result = JSON.parse(run.stdout);
    expect(result).toMatchObject({
      via: "x402",
      dry_run: false,
      status: "completed",
      receipt_check: { valid: true, reason: "ok", signer: stack.chain.receiptSigner.address },
    });
    expect(result.claim_id).toMatch(/^clm_/);
    expect(result.payout_tx).toMatch(/^0x[0-9a-f]{64}$/);
    expect(result.receipt.message).toContain(`Holder: ${holder}`);
    expect(await stack.chain.usdcBalance(holder)).toBe(USDC);
    earned.x402 = result.claim_id;
  });

  it("earns with the claim flow, piped: plain lines for each step", async () => {
    const payer = stack.chain.user(1);
    const holder = newAddress();
    const before = await stack.chain.usdcBalance(payer.address);
    const run = await runCli(
      [
        "earn",
        "--via",
        "claim",
        "--payout",
        holder,
        "--rpc",
        stack.chain.rpcUrl,
        "--agent-name",
        "cli-claim",
      ],
      earnerEnv({ PAYER_PRIVATE_KEY: payer.privateKey }),
    );
    expect(run.code, run.stderr + run.stdout).toBe(0);
    expect(run.stdout).not.toContain(ESCAPE);
    const lines = run.stdout.split("\n");
    expect(lines[0]).toMatch(
      /^Offer: pay 10 USDC to 0x[0-9a-fA-F]{40} on .+ \(chain 8453\), get 1 USDC back$/,
    );
    expect(run.stdout).toMatch(/^Wallet 0x[0-9a-fA-F]{40} holds [\d.]+ USDC/m);
    const created = /^Claim (clm_\S+) created: pay exactly (10\.\d{6}) USDC/m.exec(run.stdout);
    expect(created).not.toBeNull();
    expect(run.stdout).toMatch(/^ {2}\d\/2 confirmations$/m);
    expect(run.stdout).toMatch(/^Payment confirmed and matched/m);
    expect(run.stdout).toMatch(/^Payout 0x[0-9a-f]{64} mined: 1 USDC to /m);
    expect(run.stdout).toMatch(/^Receipt signed by 0x[0-9a-fA-F]{40}, checked offline/m);
    expect(await stack.chain.usdcBalance(holder)).toBe(USDC);
    const paid = before - (await stack.chain.usdcBalance(payer.address));
    expect(paid).toBe(BigInt(Math.round(Number(created?.[2]) * 1e6)));
    earned.claim = created?.[1];
    earned.paymentTx = /in (0x[0-9a-f]{64}) \(block/.exec(run.stdout)?.[1];
  });

  it("shows a live display on a terminal (listr2)", async () => {
    const payer = stack.chain.user(2);
    const holder = newAddress();
    const run = await runCliInTerminal(
      ["earn", "--via", "x402", "--payout", holder],
      earnerEnv({ PAYER_PRIVATE_KEY: payer.privateKey }),
    );
    expect(run.code, run.stdout).toBe(0);
    // Cursor movements and erased lines: the display redraws itself in place.
    expect(run.stdout).toContain(`${ESCAPE}1A`);
    expect(run.stdout).toContain(`${ESCAPE}2K`);
    const text = plain(run.stdout);
    expect(text).toMatch(/✔ Offer: pay 10 USDC/);
    expect(text).toMatch(/✔ Paid 10 USDC in 0x[0-9a-f]{64}: claim clm_/);
    expect(text).toMatch(/✔ Receipt signed by/);
    expect(await stack.chain.usdcBalance(holder)).toBe(USDC);
  });

  it("--dry-run shows what would be paid and creates, signs and sends nothing", async () => {
    const payer = stack.chain.user(3);
    const before = {
      claims: await stack.claimCount(),
      usdc: await stack.chain.usdcBalance(payer.address),
    };
    for (const via of ["x402", "claim"]) {
      const run = await runCli(
        ["earn", "--via", via, "--payout", newAddress(), "--rpc", stack.chain.rpcUrl, "--dry-run"],
        earnerEnv({ PAYER_PRIVATE_KEY: payer.privateKey }),
      );
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toMatch(/^Dry run: would .*Nothing was (signed|created)/m);
      expect(run.stdout).toContain(stack.chain.payTo.address);
    }
    expect(await stack.claimCount()).toBe(before.claims);
    expect(await stack.chain.usdcBalance(payer.address)).toBe(before.usdc);
  });
});

describe("pay-and-earn earn refuses", () => {
  it("without PAYER_PRIVATE_KEY: one line, exit 2, nothing created", async () => {
    const claims = await stack.claimCount();
    const run = await runCli(["earn", "--via", "x402", "--payout", newAddress()], earnerEnv());
    expect(run.code).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(/^pay-and-earn: no_key: set PAYER_PRIVATE_KEY .*\n$/);
    expect(await stack.claimCount()).toBe(claims);
  });

  it("an RPC of another chain: wrong_network before a claim or a transfer", async () => {
    const claims = await stack.claimCount();
    const run = await runCli(
      ["earn", "--via", "claim", "--payout", newAddress(), "--rpc", otherChain.rpcUrl],
      earnerEnv({ PAYER_PRIVATE_KEY: stack.chain.user(4).privateKey }),
    );
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      /^pay-and-earn: wrong_network: the RPC at \S+ serves chain 1, but the service takes payments on .+ \(chain 8453\); nothing was sent\n$/,
    );
    expect(await stack.claimCount()).toBe(claims);
  });

  it("a wallet without enough USDC: insufficient_usdc (claim flow) and the service's refusal (x402)", async () => {
    const poor = generatePrivateKey();
    const address = privateKeyToAccount(poor).address;
    await stack.chain.testClient.setBalance({ address, value: 10n ** 18n });
    const claims = await stack.claimCount();

    const claimRun = await runCli(
      ["earn", "--via", "claim", "--payout", newAddress(), "--rpc", stack.chain.rpcUrl],
      earnerEnv({ PAYER_PRIVATE_KEY: poor }),
    );
    expect(claimRun.code).toBe(1);
    expect(claimRun.stderr).toMatch(
      /^pay-and-earn: insufficient_usdc: 0x\w+ holds 0 USDC .* needs 10; nothing was sent\n$/,
    );

    // No --rpc: the x402 payment goes to the service, which refuses it before settling.
    const x402Run = await runCli(
      ["earn", "--via", "x402", "--payout", newAddress()],
      earnerEnv({ PAYER_PRIVATE_KEY: poor }),
    );
    expect(x402Run.code).toBe(1);
    expect(x402Run.stderr).toMatch(
      /^pay-and-earn: insufficient_balance: [^;]*[^.]\. Nothing was paid\.\n$/,
    );
    expect(await stack.claimCount()).toBe(claims);
  });

  it("x402 terms that are not the offer's (more, or to another pay_to): refused before signing", async () => {
    const payer = stack.chain.user(4);
    const before = await stack.chain.usdcBalance(payer.address);
    const lies: [string, (terms: PaymentRequirements) => PaymentRequirements][] = [
      [
        "one atomic unit more",
        (terms) => ({ ...terms, amount: String(BigInt(terms.amount) + 1n) }),
      ],
      ["another pay_to", (terms) => ({ ...terms, payTo: newAddress() })],
    ];
    for (const [what, change] of lies) {
      const liar = await startLyingService(change);
      try {
        for (const extra of [[], ["--dry-run"]]) {
          const run = await runCli(
            ["earn", "--via", "x402", "--payout", newAddress(), "--service", liar.url, ...extra],
            earnerEnv({ PAYER_PRIVATE_KEY: payer.privateKey }),
          );
          expect(run.code, `${what} ${extra}: ${run.stderr}`).toBe(1);
          expect(run.stderr, what).toMatch(
            /^pay-and-earn: x402_terms_refused: .*nothing (was|would be) signed\n$/,
          );
        }
        expect(liar.signedRetries(), what).toBe(0);
      } finally {
        await liar.stop();
      }
    }
    expect(await stack.chain.usdcBalance(payer.address)).toBe(before);
    // Several CLI processes, each a Node start: on a loaded 2-core machine a minute is short.
  }, 180_000);

  it("an offer of another price, token or chain, even with matching x402 terms: refused before signing", async () => {
    const payer = stack.chain.user(4);
    const before = await stack.chain.usdcBalance(payer.address);
    const otherToken = newAddress();
    const lies: [
      string,
      (offer: Record<string, unknown>) => Record<string, unknown>,
      (terms: PaymentRequirements) => PaymentRequirements,
    ][] = [
      [
        "100 USDC",
        (offer) => ({
          ...offer,
          price_usdc: "100.000000",
          x402: {
            ...(offer.x402 as object),
            amount_atomic: "100000000",
            amount_usdc: "100.000000",
          },
        }),
        (terms) => ({ ...terms, amount: "100000000" }),
      ],
      [
        "another token",
        (offer) => ({ ...offer, usdc_contract: otherToken }),
        (terms) => ({ ...terms, asset: otherToken }),
      ],
      [
        "another chain",
        (offer) => ({
          ...offer,
          chain_id: 1,
          network: "Ethereum",
          x402: { ...(offer.x402 as object), network: "eip155:1" },
        }),
        (terms) => ({ ...terms, network: "eip155:1" }),
      ],
    ];
    for (const [index, [what, offerLie, termsLie]] of lies.entries()) {
      const liar = await startLyingService(termsLie, {
        rewrite: (request, answer) =>
          request.url === "/api/info" ? { ...answer, body: offerLie(answer.body) } : answer,
      });
      try {
        for (const extra of index === 0 ? [[], ["--dry-run"]] : [[]]) {
          const run = await runCli(
            ["earn", "--via", "x402", "--payout", newAddress(), "--service", liar.url, ...extra],
            earnerEnv({ PAYER_PRIVATE_KEY: payer.privateKey }),
          );
          expect(run.code, `${what} ${extra}: ${run.stderr}`).toBe(1);
          expect(run.stderr, what).toMatch(/^pay-and-earn: offer_refused: .*\n$/);
        }
        expect(liar.signedRetries(), what).toBe(0);
      } finally {
        await liar.stop();
      }
    }
    expect(await stack.chain.usdcBalance(payer.address)).toBe(before);
  }, 120_000);

  it("a claim that asks for more than 10 USDC and its fraction: refused before the transfer", async () => {
    const payer = stack.chain.user(4);
    const before = await stack.chain.usdcBalance(payer.address);
    const liar = await startLyingService((terms) => terms, {
      rewrite: (request, answer) =>
        request.method === "POST" && request.url === "/api/claims"
          ? { ...answer, body: { ...answer.body, amount_due_usdc: "500.000000" } }
          : answer,
    });
    try {
      const run = await runCli(
        ["earn", "--via", "claim", "--payout", newAddress(), "--service", liar.url],
        earnerEnv({ PAYER_PRIVATE_KEY: payer.privateKey, PAYER_RPC_URL: stack.chain.rpcUrl }),
      );
      expect(run.code, run.stderr).toBe(1);
      expect(run.stderr).toMatch(/^pay-and-earn: claim_amount_refused: .*500\.000000.*\n$/);
    } finally {
      await liar.stop();
    }
    expect(await stack.chain.usdcBalance(payer.address)).toBe(before);
    // Several CLI processes, each a Node start: on a loaded 2-core machine a minute is short.
  }, 180_000);

  it("strips terminal control characters from what a service sends", async () => {
    const hostile = "\u001b]0;owned\u0007\u001b[2J\u001b[31mred\r\u009b1mfake\u0000";
    const liar = await startLyingService((terms) => terms, {
      rewrite: (request, answer) => {
        if (request.url === "/api/info") {
          return { ...answer, body: { ...answer.body, offer: `Offer ${hostile}` } };
        }
        if (request.method === "POST" && request.url === "/api/claims") {
          return {
            status: 400,
            body: {
              type: "/problems/invalid_request",
              title: "Invalid request",
              status: 400,
              detail: `bad ${hostile}`,
            },
          };
        }
        return answer;
      },
    });
    try {
      const info = await runCli(["info", "--service", liar.url], earnerEnv());
      expect(info.code, info.stderr).toBe(0);
      expect(info.stdout).toContain("Offer ");
      const earn = await runCli(
        ["earn", "--via", "claim", "--payout", newAddress(), "--service", liar.url],
        earnerEnv({
          PAYER_PRIVATE_KEY: stack.chain.user(4).privateKey,
          PAYER_RPC_URL: stack.chain.rpcUrl,
        }),
      );
      expect(earn.code).toBe(1);
      expect(earn.stderr).toContain("invalid_request: bad");
      for (const text of [info.stdout, info.stderr, earn.stdout, earn.stderr]) {
        // Lines end with \n; nothing else below 0x20, no DEL, no C1 control.
        expect(text).not.toMatch(/(?!\n)\p{Cc}/u);
      }
    } finally {
      await liar.stop();
    }
  });

  it("a signed payment that gets no answer: x402_outcome_unknown, not a refusal", async () => {
    const liar = await startLyingService((terms) => terms);
    try {
      const run = await runCli(
        ["earn", "--via", "x402", "--payout", newAddress(), "--service", liar.url],
        earnerEnv({ PAYER_PRIVATE_KEY: stack.chain.user(4).privateKey }),
      );
      expect(liar.signedRetries()).toBe(1);
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(
        /^pay-and-earn: x402_outcome_unknown: the signed payment was sent, but no answer came \(.+\); it may still settle/,
      );
    } finally {
      await liar.stop();
    }
  });

  it("a failure after the transfer is sent names the claim and the payment to follow", async () => {
    const flaky = await startLyingService((terms) => terms, { failClaimReads: true });
    try {
      const run = await runCli(
        [
          "earn",
          "--via",
          "claim",
          "--payout",
          newAddress(),
          "--service",
          flaky.url,
          "--rpc",
          stack.chain.rpcUrl,
        ],
        earnerEnv({ PAYER_PRIVATE_KEY: stack.chain.user(4).privateKey }),
      );
      expect(run.code).toBe(1);
      const sent = /^Sent [\d.]+ USDC in (0x[0-9a-f]{64})/m.exec(run.stdout);
      const claimId = /^Claim (clm_\S+) created/m.exec(run.stdout)?.[1];
      expect(run.stderr).toBe(
        `pay-and-earn: temporarily_unavailable: Try again later. The payment ${sent?.[1]} is sent for ${claimId}: follow it with pay-and-earn status ${claimId} --watch\n`,
      );
      // The payment is not lost: the real service pays the claim out all the same.
      await stack.untilClaimStatus(claimId as string, "completed");
    } finally {
      await flaky.stop();
    }
  });

  it("a bad payout address, with the service's own words, exit 2", async () => {
    const run = await runCli(["earn", "--payout", "0x123"], earnerEnv());
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^pay-and-earn: invalid_option: --payout must be a 0x address/);
  });

  it("a service over plain http elsewhere than this machine: insecure_service, before any request", async () => {
    const run = await runCli(
      [
        "earn",
        "--via",
        "x402",
        "--payout",
        newAddress(),
        "--service",
        "http://pay-and-earn.invalid",
      ],
      earnerEnv({ PAYER_PRIVATE_KEY: stack.chain.user(4).privateKey }),
    );
    expect(run.code).toBe(2);
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(
      /^pay-and-earn: insecure_service: earn pays through http:\/\/pay-and-earn\.invalid: use https/,
    );
  });
});

describe("pay-and-earn status, receipt, verify, payment, ledger, info", () => {
  it("status: lines, --json as the API's claim, and --watch ends at once on a final claim", async () => {
    const claimId = earned.claim as string;
    const [human, json, watched] = await Promise.all([
      runCli(["status", claimId], earnerEnv()),
      runCli(["status", claimId, "--json"], earnerEnv()),
      runCli(["status", claimId, "--watch", "--json"], earnerEnv()),
    ]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(new RegExp(`^Claim +${claimId}$`, "m"));
    expect(human.stdout).toMatch(/^Status +completed$/m);

    expect(claimResponse.parse(JSON.parse(json.stdout))).toMatchObject({
      claim_id: claimId,
      status: "completed",
    });

    expect(watched.code).toBe(0);
    expect(JSON.parse(watched.stdout).status).toBe("completed");
  });

  it("status --watch follows a claim's event stream until it completes", async () => {
    const payer = stack.chain.user(5);
    const claim = await stack.createClaim(newAddress());
    let shownWaiting: () => void = () => {};
    const waitingShown = new Promise<void>((resolve) => {
      shownWaiting = resolve;
    });
    const watching = runCli(
      ["status", claim.claim_id, "--watch"],
      // Polling every ten minutes: only the event stream can tell it of the completion in time.
      earnerEnv({ PAY_AND_EARN_POLL_MS: "600000" }),
      { onStdout: (printed) => /^ {2}awaiting_payment: /m.test(printed) && shownWaiting() },
    );
    // Paid only once the watch has shown the claim waiting: a CLI slow to start on a busy
    // machine first looked after the payment was already matched.
    const first = await Promise.race([waitingShown.then(() => null), watching]);
    expect(first, first?.stdout).toBeNull();
    await stack.chain.transferUsdc(
      payer,
      stack.chain.payTo.address,
      BigInt(Math.round(Number(claim.amount_due_usdc) * 1e6)),
    );
    const run = await watching;
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^ {2}awaiting_payment: /m);
    expect(run.stdout).toMatch(new RegExp(`^${claim.claim_id}: completed: `, "m"));
  });

  it("an unknown claim and a malformed id: one line each, exit 1 and 2", async () => {
    const [unknown, receipt, malformed] = await Promise.all([
      runCli(["status", "clm_AAAAAAAAAAAAAAAAAAAAAA"], earnerEnv()),
      runCli(["receipt", "clm_AAAAAAAAAAAAAAAAAAAAAA"], earnerEnv()),
      runCli(["status", "nope"], earnerEnv()),
    ]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^pay-and-earn: claim_not_found: .+\n$/);
    expect(receipt.code).toBe(1);
    expect(receipt.stderr).toMatch(/^pay-and-earn: claim_not_found: /);
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toBe(
      "pay-and-earn: invalid_option: <claim_id> is not a claim id (clm_…)\n",
    );
  });

  it("receipt --out writes receipt.json; verify checks it offline, and refuses a tampered one", async () => {
    const file = join(workDir, "receipt.json");
    const saved = await runCli(["receipt", earned.claim as string, "--out", file], earnerEnv());
    expect(saved.code, saved.stderr).toBe(0);
    const receipt = receiptResponse.parse(JSON.parse(await readFile(file, "utf8")));
    expect(receipt.signer).toBe(stack.chain.receiptSigner.address);

    const tamperedFile = join(workDir, "tampered.json");
    const holder = /Holder: (0x\w+)/.exec(receipt.message)?.[1] as string;
    await writeFile(
      tamperedFile,
      JSON.stringify({ ...receipt, message: receipt.message.replace(holder, newAddress()) }),
    );
    const garbage = join(workDir, "garbage.json");
    await writeFile(garbage, "not json");
    const [verified, offline, tampered, wrongSigner, unreadable] = await Promise.all([
      runCli(["verify", file], earnerEnv()),
      // Offline for real: a --signer and a service that is not there.
      runCli(["verify", file, "--signer", stack.chain.receiptSigner.address, "--json"], {
        PAY_AND_EARN_URL: "http://127.0.0.1:59999",
      }),
      runCli(["verify", tamperedFile], earnerEnv()),
      runCli(["verify", file, "--signer", newAddress()], {}),
      runCli(["verify", garbage, "--signer", newAddress()], {}),
    ]);
    expect(verified.code, verified.stderr).toBe(0);
    expect(verified.stdout).toMatch(/^Valid: Signed by the service's receipt key/);
    expect(verified.stdout).toMatch(new RegExp(`^Claim +${earned.claim}$`, "m"));
    expect(offline.code, offline.stderr).toBe(0);
    expect(JSON.parse(offline.stdout)).toMatchObject({ valid: true, reason: "ok" });
    expect(tampered.code).toBe(1);
    expect(tampered.stderr).toMatch(
      /^pay-and-earn: signed_by_another_key: Signed, but not by this service's receipt key\. \(signed by 0x\w+; the receipt key is 0x\w+\)\n$/,
    );

    expect(wrongSigner.code).toBe(1);
    expect(wrongSigner.stderr).toMatch(/^pay-and-earn: signed_by_another_key: /);
    expect(unreadable.code).toBe(2);
    expect(unreadable.stderr).toMatch(/^pay-and-earn: invalid_option: .*is not JSON/);
  });

  it("payment: what happened to a payment, and a hash it never saw", async () => {
    const [run, human, unseen] = await Promise.all([
      runCli(["payment", earned.paymentTx as string, "--json"], earnerEnv()),
      runCli(["payment", earned.paymentTx as string], earnerEnv()),
      runCli(["payment", `0x${"ab".repeat(32)}`], earnerEnv()),
    ]);
    expect(run.code, run.stderr).toBe(0);
    const explanation = paymentExplanationResponse.parse(JSON.parse(run.stdout));
    expect(explanation.transfers[0]).toMatchObject({ state: "paid_claim", claim_id: earned.claim });
    expect(human.stdout).toContain(explanation.summary);
    expect(unseen.code).toBe(1);
    expect(unseen.stderr).toMatch(/^pay-and-earn: tx_not_found: /);
  });

  it("ledger: the payouts, filtered by agent name", async () => {
    const [run, human, bad] = await Promise.all([
      runCli(["ledger", "--agent-name", "cli-claim", "--json"], earnerEnv()),
      runCli(["ledger", "--limit", "2"], earnerEnv()),
      runCli(["ledger", "--limit", "500"], earnerEnv()),
    ]);
    expect(run.code, run.stderr).toBe(0);
    const ledger = ledgerResponse.parse(JSON.parse(run.stdout));
    expect(ledger.entries.map((entry) => entry.claim_id)).toEqual([earned.claim]);
    const lines = human.stdout.trim().split("\n");
    expect(lines).toHaveLength(3);
    expect(lines[2]).toMatch(/^\(more: http.*\/api\/ledger\?.*cursor=/);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe("pay-and-earn: invalid_option: --limit must be at most 100\n");
  });

  it("info: the offer, and a service that is not there", async () => {
    const [run, human, down] = await Promise.all([
      runCli(["info", "--json"], earnerEnv()),
      runCli(["info"], earnerEnv()),
      runCli(["info", "--service", "http://127.0.0.1:59999"], {}),
    ]);
    const offer = offerResponse.parse(JSON.parse(run.stdout));
    expect(offer.pay_to).toBe(stack.chain.payTo.address);
    expect(human.stdout).toMatch(/^Receipt signer +0x\w{40}$/m);
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(
      /^pay-and-earn: service_unreachable: cannot reach the service at http:\/\/127\.0\.0\.1:59999: .+\n$/,
    );
  });

  it("runs as `npx pay-and-earn` in the repository (the package's bin)", async () => {
    const run = await new Promise<{ code: number; stdout: string }>((resolve) => {
      execFile(
        "npx",
        ["--no-install", "pay-and-earn", "--version"],
        { cwd: join(import.meta.dirname, "..", ".."), env: process.env },
        (error, stdout) => resolve({ code: error ? 1 : 0, stdout }),
      );
    });
    expect(run).toEqual({ code: 0, stdout: `${packageJson.version}\n` });
  });

  it("--help on every command, each with an example", async () => {
    const commands = [
      "earn",
      "status",
      "receipt",
      "verify",
      "payment",
      "ledger",
      "info",
      "doctor",
      "payouts",
      "claims",
      "reissue-payout",
    ];
    const runs = await Promise.all(commands.map((command) => runCli([command, "--help"])));
    for (const [index, run] of runs.entries()) {
      expect(run.code, commands[index]).toBe(0);
      expect(run.stdout, commands[index]).toMatch(/Examples?:\n {2}.*pay-and-earn /);
    }
  });
});

describe("operator commands", () => {
  it("doctor: ok and warn lines for a working devnet, exit 0", async () => {
    const run = await runCli(["doctor"], operatorEnv());
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^ok {4}configuration /m);
    expect(run.stdout).toMatch(/^ok {4}rpc +chain 8453, head block \d+$/m);
    expect(run.stdout).toMatch(/^ok {4}migrations +all \d+ applied$/m);
    expect(run.stdout).toMatch(/^ok {4}indexer +Ponder has indexed block \d+/m);
    // The earn tests above made payouts: a rate, and the days it lasts.
    expect(run.stdout).toMatch(
      /^ok {4}payout wallet +0x\w+ holds [\d.]+ USDC and [\d.]+ ETH: \d+ more payouts, [\d.]+ days at [\d.]+ payouts a day/m,
    );
    expect(run.stdout).toMatch(/^(ok|warn) +service +http:\/\/127\.0\.0\.1:\d+ says /m);
    expect(run.stdout).toMatch(/^ok {4}receipt key +signs as /m);
    expect(run.stdout).toMatch(/^ok {4}ledger +its kept figures equal a fresh count$/m);
    expect(run.stdout).toMatch(/^ok {4}metrics +the scrape's kept counts equal a fresh count$/m);
    expect(run.stdout).toMatch(/^warn {2}mail +.*SMTP_URL is unset/m);
    expect(run.stdout).toMatch(/^ +→ set SMTP_URL/m);
  });

  it("doctor warns, exit 0, when a migration changed after the database applied it", async () => {
    const [first] = await readMigrations();
    if (!first) throw new Error("the service has no migrations");
    // As if the database had applied an earlier text of the file.
    await stack.service.sql`
      update app.schema_migrations set checksum = 'an earlier text' where id = ${first.id}`;
    try {
      const run = await runCli(["doctor"], operatorEnv());
      expect(run.code, run.stdout + run.stderr).toBe(0);
      expect(run.stdout).toMatch(
        new RegExp(
          `^warn {2}migrations +changed after this database applied them: 0001 ${first.name}$`,
          "m",
        ),
      );
      expect(run.stdout).toMatch(/^ +→ the database keeps what it applied/m);
    } finally {
      await stack.service.sql`
        update app.schema_migrations set checksum = ${migrationChecksum(first)}
        where id = ${first.id}`;
    }
  });

  it("doctor fails, exit 1, when a kept ledger figure or scrape count differs from a fresh count", async () => {
    // As if a trigger had missed a completion: the day's kept row one payout short, and the
    // scrape's count of confirmed payouts one short too (a change row, as the triggers add them).
    const { sql } = stack.service;
    const [day] = await sql<{ day: string }[]>`
      update app.ledger_days set completed_payouts = completed_payouts - 1
      where day = (select max(day) from app.ledger_days) returning day::text`;
    if (!day) throw new Error("no ledger day: the earn tests above made payouts");
    await sql`
      insert into app.row_count_changes (counted, label, change) values ('payouts', 'confirmed', -1)`;
    try {
      const run = await runCli(["doctor"], operatorEnv());
      expect(run.code, run.stdout + run.stderr).toBe(1);
      expect(run.stdout).toMatch(
        new RegExp(
          `^fail {2}ledger +its kept figures differ from a fresh count: 1 days differ \\(${day.day}: `,
          "m",
        ),
      );
      expect(run.stdout).toMatch(
        /^fail {2}metrics +the scrape's kept counts differ from a fresh count: 1 differ \(payouts\/confirmed: kept \d+, fresh \d+\)$/m,
      );
    } finally {
      await sql`
        update app.ledger_days set completed_payouts = completed_payouts + 1 where day = ${day.day}::date`;
      await sql`
        insert into app.row_count_changes (counted, label, change) values ('payouts', 'confirmed', 1)`;
    }
  });

  it("doctor warns, exit 0, when health's attention counts past the marks differ from a read of every row", async () => {
    const { sql } = stack.service;
    const indexer = await readIndexerTables(sql);
    if (!indexer) throw new Error("Ponder has not made the chain views");
    // As if the attention check had passed a final payout whose transfer the indexer does not
    // hold, without holding it: health's read misses it, a read of every row does not. Its nonce
    // is below every real one, so the service's next payout takes the nonce it would have.
    await sql`
      insert into app.attention_checked (indexer_tables, transfers_through_block,
        transfers_through_log, payouts_through_nonce, payments_confirmations)
      values (${indexer}, -1, -1, -1, 0)
      on conflict (only_row) do update set indexer_tables = excluded.indexer_tables,
        payouts_through_nonce = -1`;
    const address = `0x${"c".repeat(40)}`;
    await sql`
      insert into app.claims (id, flow, payout_address, amount_due, status, expires_at, paid_at)
      values ('clm_doctor_missing', 'claim', ${address}, 10000000, 'paying',
        now() + interval '7 days', now())`;
    await sql`
      insert into app.payouts (claim_id, to_address, amount, nonce, tx_hash, raw_tx, status,
        final_at)
      values ('clm_doctor_missing', ${address}, 9000000, -5, ${`0x${"d".repeat(64)}`}, '0x00',
        'confirmed', now())`;
    try {
      const run = await runCli(["doctor"], operatorEnv());
      expect(run.code, run.stdout + run.stderr).toBe(0);
      expect(run.stdout).toMatch(
        /^warn {2}attention check +health's counts past the marks differ from a read of every row: payout_missing_on_chain 0, every row 1$/m,
      );
      expect(run.stdout).toMatch(/^warn {2}attention +1 × payout_missing_on_chain: /m);
    } finally {
      await sql`delete from app.payouts where claim_id = 'clm_doctor_missing'`;
      await sql`delete from app.events where claim_id = 'clm_doctor_missing'`;
      await sql`delete from app.claims where id = 'clm_doctor_missing'`;
      await sql`truncate app.attention_checked`;
    }
  });

  it("doctor fails, exit 1, on a broken configuration or an unreachable database", async () => {
    const [broken, noDatabase] = await Promise.all([
      runCli(["doctor", "--json"], operatorEnv({ PAY_TO: "nonsense" })),
      runCli(["doctor"], operatorEnv({ DATABASE_URL: "postgres://nobody@127.0.0.1:9/none" })),
    ]);
    expect(broken.code).toBe(1);
    expect(JSON.parse(broken.stdout)).toMatchObject({
      verdict: "fail",
      findings: [{ check: "configuration", verdict: "fail", detail: "PAY_TO is not an address" }],
    });
    expect(broken.stderr).toBe("pay-and-earn: doctor_failed: configuration failed\n");

    expect(noDatabase.code).toBe(1);
    expect(noDatabase.stdout).toMatch(/^fail {2}database +DATABASE_URL does not answer/m);
    expect(noDatabase.stdout).toMatch(/^ok {4}rpc /m);
  });

  it("a paid claim waiting for an unfunded payout wallet: payouts --stuck, claims --status paid, doctor fail", async () => {
    const payoutWallet = stack.chain.payout.address;
    const eth = await stack.chain.publicClient.getBalance({ address: payoutWallet });
    await stack.chain.testClient.setBalance({ address: payoutWallet, value: 0n });
    try {
      const claim = await stack.createClaim(newAddress());
      await stack.chain.transferUsdc(
        stack.chain.user(6),
        stack.chain.payTo.address,
        BigInt(Math.round(Number(claim.amount_due_usdc) * 1e6)),
      );
      await stack.untilClaimStatus(claim.claim_id, "paid");

      const [stuck, stuckLines, paid, doctor, nothing] = await Promise.all([
        runCli(["payouts", "--stuck", "--older-than", "0", "--json"], operatorEnv()),
        runCli(["payouts", "--stuck", "--older-than", "0"], operatorEnv()),
        runCli(["claims", "--status", "paid"], operatorEnv()),
        runCli(["doctor"], operatorEnv()),
        runCli(["payouts", "--stuck"], operatorEnv()),
      ]);
      expect(stuck.code, stuck.stderr).toBe(0);
      expect(JSON.parse(stuck.stdout).payouts).toContainEqual(
        expect.objectContaining({
          claim_id: claim.claim_id,
          reason: "payouts_waiting",
          payout_tx: null,
        }),
      );
      expect(stuckLines.stdout).toMatch(
        new RegExp(`^${claim.claim_id} {2}payouts_waiting {2}waiting \\d+ s$`, "m"),
      );

      expect(paid.stdout).toMatch(new RegExp(`^${claim.claim_id} {2}paid {2}claim `, "m"));
      expect(paid.stdout).toMatch(/^ {2}paid, no payout signed yet/m);

      expect(doctor.code).toBe(1);
      expect(doctor.stdout).toMatch(/^fail {2}payout wallet +.*cannot pay the next payout$/m);
      expect(doctor.stdout).toMatch(/→ send ETH \(gas\) to 0x/);
      expect(doctor.stderr).toBe("pay-and-earn: doctor_failed: payout wallet failed\n");

      expect(nothing.stdout).toBe("No payout has waited more than 120 s.\n");

      // Funded again while no block is mined: the payout is signed and sent, but not mined.
      await stack.chain.testClient.setIntervalMining({ interval: 0 });
      await stack.chain.testClient.setAutomine(false);
      try {
        await stack.chain.testClient.setBalance({ address: payoutWallet, value: eth });
        await stack.untilClaimStatus(claim.claim_id, "paying");
        const [unmined, paying] = await Promise.all([
          runCli(["payouts", "--stuck", "--older-than", "0", "--json"], operatorEnv()),
          runCli(["claims", "--status", "paying"], operatorEnv()),
        ]);
        expect(JSON.parse(unmined.stdout).payouts).toContainEqual(
          expect.objectContaining({
            claim_id: claim.claim_id,
            reason: "payouts_unconfirmed",
            payout_tx: expect.stringMatching(/^0x[0-9a-f]{64}$/),
          }),
        );
        expect(paying.stdout).toMatch(
          new RegExp(
            `^${claim.claim_id} {2}paying[^\n]*\n {2}payout 0x[0-9a-f]{64} is (signed|broadcast)$`,
            "m",
          ),
        );
      } finally {
        await stack.chain.testClient.setIntervalMining({ interval: 1 });
      }
      await stack.untilClaimStatus(claim.claim_id, "completed");
    } finally {
      await stack.chain.testClient.setBalance({ address: payoutWallet, value: eth });
    }
  });

  it("a payout address the token refuses, paid in one transaction: nothing charged, the reason said", async () => {
    const holder = newAddress();
    await callDevnetToken(stack.chain, { functionName: "blacklist", args: [holder] });
    const payer = stack.chain.user(6);
    const before = await stack.chain.usdcBalance(payer.address);
    const run = await runCli(
      ["earn", "--via", "x402", "--payout", holder],
      earnerEnv({ PAYER_PRIVATE_KEY: payer.privateKey }),
    );
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^pay-and-earn: payout_recipient_blacklisted: USDC refuses /);
    expect(await stack.chain.usdcBalance(payer.address)).toBe(before);
  });

  it("a payout that reverts for good: earn says claim_failed, claims --status failed says why", async () => {
    const holder = newAddress();
    await callDevnetToken(stack.chain, { functionName: "blacklist", args: [holder] });
    // The claim flow: the payment is taken first, the payout reverts, and the claim fails for a
    // person to look at (in one x402 transaction nothing would be taken: the test above).
    const run = await runCli(
      ["earn", "--via", "claim", "--payout", holder, "--rpc", stack.chain.rpcUrl],
      earnerEnv({ PAYER_PRIVATE_KEY: stack.chain.user(6).privateKey }),
    );
    expect(run.code).toBe(1);
    const claimId = /^Claim +(clm_\S+)/m.exec(run.stdout)?.[1];
    expect(claimId, run.stdout).toBeDefined();
    expect(run.stderr).toBe(
      `pay-and-earn: claim_failed: ${claimId} failed (payout_reverted): ${(await stack.api(`/api/claims/${claimId}`)).body.next_step}\n`,
    );

    const watched = await runCli(["status", claimId as string, "--watch"], earnerEnv());
    expect(watched.code).toBe(1);
    expect(watched.stderr).toMatch(
      new RegExp(`^pay-and-earn: claim_failed: ${claimId} failed \\(payout_reverted\\): `),
    );

    const failed = await runCli(["claims", "--status", "failed", "--json"], operatorEnv());
    expect(failed.code, failed.stderr).toBe(0);
    expect(JSON.parse(failed.stdout).claims).toContainEqual(
      expect.objectContaining({
        claim_id: claimId,
        failure_reason: "payout_reverted",
        flow: "claim",
      }),
    );
    const since = await runCli(
      ["claims", "--status", "failed", "--since", "2999-01-01"],
      operatorEnv(),
    );
    expect(since.stdout).toBe("No failed claims since 2999-01-01T00:00:00.000Z.\n");
  });

  it("operator commands without a configuration: one line, exit 2", async () => {
    const [stuck, reissue] = await Promise.all([
      runCli(["payouts", "--stuck"], {}),
      runCli(["reissue-payout", "clm_unknown"], {}),
    ]);
    for (const run of [stuck, reissue]) {
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(
        /^pay-and-earn: invalid_configuration: RPC_URL is required; .*\n$/,
      );
    }
  });

  it("reissue-payout refuses a claim that does not exist: one line, exit 1", async () => {
    const run = await runCli(["reissue-payout", "clm_unknown"], operatorEnv());
    expect(run).toEqual({
      code: 1,
      stdout: "",
      stderr: "pay-and-earn: claim_not_found: no claim clm_unknown\n",
    });
  });
});
