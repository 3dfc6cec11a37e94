import { type Address, getAddress, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { PRICE_ATOMIC } from "../../../api/money.ts";
import type { DevnetAccount } from "../../../scripts/devnet/accounts.ts";
import type { TestChain } from "../chain.ts";
import { amountIn, claimIdIn, sendToIntake, type TestMailCatcher } from "../mail.ts";
import { atomic, USDC } from "../usdc.ts";
import { officialPayment, payingFetch } from "../x402.ts";
import { a2aCreateClaim, mcpEarnPaid, mcpEarnTerms } from "./agentClients.ts";

/**
 * How a payment was made:
 * - `exact_amount` (variant A): a claim for a fresh address, paid its exact `amount_due`;
 * - `sender`: a claim for the paying wallet itself, paid 10 USDC from it;
 * - `signed_attach`: a claim for a fresh address, paid from another wallet (variant A: its exact
 *   amount; B: 10 USDC), the tx hash attached with that wallet's signature of the claim id;
 * - `x402`: the official client (@x402/fetch), one request;
 * - `mcp_x402`: an agent paying and earning in one MCP tool call (`earn_with_x402`, the MCP SDK
 *   client, the payment signed by the official x402 client), the same payment sent again to
 *   another replica when the connection dies under it;
 * - `a2a_claim`: a claim opened as an A2A task (the A2A SDK client), then paid as `exact_amount`
 *   (variant A) or `sender` (B) pays;
 * - `mail_claim`: a claim opened by a mail to a replica's SMTP intake (sent again, same
 *   Message-ID, to another replica when one fails), its id and amount read from the reply mail,
 *   then paid as `exact_amount` (A) or `sender` (B) pays; its receipt mail is checked at the end;
 * - `below_price`: 1 USDC to pay_to with no claim: it must earn nothing.
 */
export type PaymentKind =
  | "exact_amount"
  | "sender"
  | "signed_attach"
  | "x402"
  | "mcp_x402"
  | "a2a_claim"
  | "mail_claim"
  | "below_price";

export interface SentPayment {
  kind: PaymentKind;
  lane: number;
  payoutAddress: Address;
  claimId?: string;
  txHash?: Hex;
  /** What the client saw at the end: an HTTP status, or why it gave up. */
  outcome: string;
}

/** The service as clients reach it: any live replica will do, as behind a load balancer. */
export interface ServiceEndpoints {
  /** Base URLs of the replicas running right now. */
  urls(): string[];
  /** The SMTP intake ports of the replicas running right now (the MX records, say). */
  smtpPorts(): number[];
}

/** Mail clients: where they write, and the mail server that receives the service's answers. */
export interface MailEndpoints {
  intakeAddress: string;
  catcher: TestMailCatcher;
}

const KINDS: Record<"A" | "B", PaymentKind[]> = {
  A: [
    "exact_amount",
    "a2a_claim",
    "sender",
    "signed_attach",
    "x402",
    "mcp_x402",
    "mail_claim",
    "below_price",
  ],
  B: [
    "sender",
    "a2a_claim",
    "signed_attach",
    "signed_attach",
    "x402",
    "mcp_x402",
    "mail_claim",
    "below_price",
  ],
};

/**
 * How long a client keeps trying the replicas, as a real client would: every replica was
 * unanswering for over 60 s at once in a whole run on a slow 2-core VM, and a payer in variant B
 * that gave up its attach left its payment unmatched, which the verdict counts as unpaid.
 */
const REPLICA_WAIT_MS = 180_000;

/**
 * Retries a request across replicas (their URLs, or their SMTP ports) while the service is down
 * or restarting.
 */
async function withAnyReplica<E, T>(
  replicas: () => E[],
  attempt: (replica: E) => Promise<T | undefined>,
  timeoutMs: number,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    for (const replica of replicas()) {
      try {
        const result = await attempt(replica);
        if (result !== undefined) return result;
      } catch (error) {
        lastError = error;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`no replica answered within ${timeoutMs} ms (${String(lastError)})`);
}

async function postJson(
  url: string,
  body: unknown,
): Promise<{ status: number; body: Partial<Record<string, string>> }> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(20_000),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : {} };
}

/**
 * A steady stream of payments as clients make them, one lane per paying wallet (so a wallet's
 * nonces never race): each lane loops over the deployment's ways to pay until stopped. A
 * client whose request died with the service retries elsewhere; what it saw is recorded, but
 * the verdict comes from the chain and the database (invariants.ts), not from the clients.
 */
export function startPaymentStream(options: {
  chain: TestChain;
  endpoints: ServiceEndpoints;
  variant: "A" | "B";
  payers: DevnetAccount[];
  /** Between two payments of a lane, to keep the load steady rather than flat out. */
  pauseMs: number;
  mail: MailEndpoints;
}) {
  const { chain, endpoints } = options;
  const sent: SentPayment[] = [];
  const errors: string[] = [];
  let stopping = false;
  let random = 1;

  let claimsAsked = 0;

  /**
   * POST /api/claims until a replica answers. Each payment's request has an agent name of its
   * own: the service gives an open claim back to the same request asked again (200), which is
   * what a retry after a lost answer needs, but a lane's next `sender` payment, made before the
   * last one confirmed, must open a claim of its own rather than pay the same one twice.
   */
  async function createClaim(payoutAddress: Address): Promise<{ claimId: string; due: string }> {
    claimsAsked += 1;
    const request = { payout_address: payoutAddress, agent_name: `fault-suite-${claimsAsked}` };
    return withAnyReplica(
      endpoints.urls,
      async (url) => {
        const response = await postJson(`${url}/api/claims`, request);
        const { claim_id: claimId, amount_due_usdc: due } = response.body;
        // 200: the address's open claim given back (a retry whose first answer was lost).
        if ((response.status === 201 || response.status === 200) && claimId && due) {
          return { claimId, due };
        }
        if (response.status >= 500) return undefined;
        throw new Error(`POST /api/claims answered ${response.status}`);
      },
      REPLICA_WAIT_MS,
    );
  }

  /** The same, as an A2A task: a request retried on another replica gets its open claim back. */
  async function createClaimByA2a(
    payoutAddress: Address,
  ): Promise<{ claimId: string; due: string }> {
    claimsAsked += 1;
    const agentName = `fault-suite-${claimsAsked}`;
    return withAnyReplica(
      endpoints.urls,
      (url) => a2aCreateClaim(url, payoutAddress, agentName),
      REPLICA_WAIT_MS,
    );
  }

  let mailsSent = 0;

  /**
   * A mail to the intake of any running replica, as a sending mail server delivers it: a
   * temporary failure (a replica killed mid-session, 451 while PostgreSQL restarts) is sent
   * again, with the same Message-ID, so the service stores and answers it once. The claim is
   * read from the reply the service sends to the catcher.
   */
  async function createClaimByMail(
    payoutAddress: Address,
  ): Promise<{ claimId: string; due: string }> {
    mailsSent += 1;
    claimsAsked += 1;
    const from = `fault-suite-${options.variant}-${mailsSent}@client.test`;
    const message = {
      from,
      to: options.mail.intakeAddress,
      subject: "earn",
      text: `${payoutAddress}\nagent: fault-suite-${claimsAsked}\n`,
      messageId: `<fault-suite-${options.variant}-${mailsSent}@client.test>`,
    };
    await withAnyReplica(
      endpoints.smtpPorts,
      (port) =>
        sendToIntake(port, message, { socketTimeout: 20_000 }).then(
          () => true,
          (error: { responseCode?: number }) => {
            if ((error.responseCode ?? 0) >= 500) throw error;
            return undefined;
          },
        ),
      REPLICA_WAIT_MS,
    );
    const [reply] = await options.mail.catcher.waitFor(from, 1, REPLICA_WAIT_MS);
    return { claimId: claimIdIn(reply), due: amountIn(reply) };
  }

  /** A claim-flow payment: the claim first, then the transfer; returns its record. */
  async function payClaim(
    kind: PaymentKind,
    lane: number,
    payer: DevnetAccount,
    payoutAddress: Address,
    amount: (due: string) => bigint,
    open: (payoutAddress: Address) => Promise<{ claimId: string; due: string }> = createClaim,
  ): Promise<SentPayment> {
    const claim = await open(payoutAddress);
    const txHash = await chain.transferUsdc(payer, chain.payTo.address, amount(claim.due));
    const record: SentPayment = {
      kind,
      lane,
      payoutAddress,
      claimId: claim.claimId,
      txHash,
      outcome: "sent",
    };
    sent.push(record);
    return record;
  }

  async function payOnce(lane: number, payer: DevnetAccount, kind: PaymentKind): Promise<void> {
    const fresh = privateKeyToAccount(generatePrivateKey()).address;
    switch (kind) {
      case "exact_amount":
        await payClaim(kind, lane, payer, fresh, atomic);
        return;
      case "sender":
        await payClaim(kind, lane, payer, payer.address, () => PRICE_ATOMIC);
        return;
      case "signed_attach": {
        // What qualifies from another wallet: in variant A the claim's exact amount, in B the price.
        const record = await payClaim(kind, lane, payer, fresh, (due) =>
          options.variant === "A" ? atomic(due) : PRICE_ATOMIC,
        );
        const { claimId, txHash } = record;
        const signature = await chain.walletFor(payer).signMessage({ message: claimId as string });
        record.outcome = await withAnyReplica(
          endpoints.urls,
          async (url) => {
            const response = await postJson(`${url}/api/claims/${claimId}/tx`, {
              tx_hash: txHash,
              signature,
            });
            if (response.status >= 500) return undefined;
            return `attach ${response.status}${response.body.type ? ` ${response.body.type}` : ""}`;
          },
          REPLICA_WAIT_MS,
        );
        return;
      }
      case "x402": {
        // Between a SIGKILL and the restart no replica runs: a client tries again shortly.
        const url = await withAnyReplica(
          endpoints.urls,
          async (candidate) => candidate,
          REPLICA_WAIT_MS,
        );
        const record: SentPayment = { kind, lane, payoutAddress: fresh, outcome: "sent" };
        sent.push(record);
        try {
          const response = await payingFetch(payer.privateKey, "$10")(`${url}/api/x402/earn`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ payout_address: fresh }),
            signal: AbortSignal.timeout(30_000),
          });
          const body = (await response.json().catch(() => ({}))) as {
            claim_id?: string;
            reason?: string;
            type?: string;
          };
          record.claimId = body.claim_id;
          const why = response.status === 200 ? "" : ` ${body.reason ?? body.type ?? ""}`;
          record.outcome = `x402 ${response.status}${why}`.trimEnd();
        } catch (error) {
          // The service died or the client gave up: what happened is for the chain to say.
          record.outcome = `x402 ${(error as Error).name}`;
        }
        return;
      }
      case "a2a_claim":
      case "mail_claim": {
        // Opened by an agent or by mail, then paid as `exact_amount` (A) or `sender` (B) pays.
        const open = kind === "a2a_claim" ? createClaimByA2a : createClaimByMail;
        if (options.variant === "A") {
          await payClaim(kind, lane, payer, fresh, atomic, open);
        } else {
          await payClaim(kind, lane, payer, payer.address, () => PRICE_ATOMIC, open);
        }
        return;
      }
      case "mcp_x402": {
        const terms = await withAnyReplica(
          endpoints.urls,
          (url) => mcpEarnTerms(url, fresh),
          REPLICA_WAIT_MS,
        );
        const payment = await officialPayment(payer.privateKey, terms);
        const record: SentPayment = { kind, lane, payoutAddress: fresh, outcome: "sent" };
        sent.push(record);
        try {
          // A connection lost mid-call is retried with the same payment: a replay, never a
          // second payment (the authorization moves money once).
          const answer = await withAnyReplica(
            endpoints.urls,
            (url) => mcpEarnPaid(url, fresh, payment),
            REPLICA_WAIT_MS,
          );
          record.claimId = answer.claimId;
          record.outcome = answer.outcome;
        } catch (error) {
          record.outcome = `mcp ${(error as Error).name}`;
        }
        return;
      }
      case "below_price": {
        const txHash = await chain.transferUsdc(payer, chain.payTo.address, 1n * USDC);
        sent.push({
          kind,
          lane,
          payoutAddress: getAddress(payer.address),
          txHash,
          outcome: "sent",
        });
        return;
      }
    }
  }

  /** A cheap deterministic sequence: the order of kinds differs per lane but not per run. */
  function nextKind(): PaymentKind {
    random = (random * 48_271) % 2_147_483_647;
    const kinds = KINDS[options.variant];
    return kinds[random % kinds.length] as PaymentKind;
  }

  const lanes = options.payers.map(async (payer, lane) => {
    while (!stopping) {
      const kind = nextKind();
      try {
        await payOnce(lane, payer, kind);
      } catch (error) {
        errors.push(`${kind}: ${(error as Error).message.split("\n")[0]}`);
      }
      await new Promise((resolve) => setTimeout(resolve, options.pauseMs));
    }
  });

  return {
    sent,
    errors,
    /** Stops after each lane's payment in flight; resolves when all lanes have ended. */
    async stop(): Promise<void> {
      stopping = true;
      await Promise.all(lanes);
    },
  };
}

export type PaymentStream = ReturnType<typeof startPaymentStream>;
