import { type Address, getAddress, type Hex, parseAbiItem } from "viem";
import type { Database } from "../../../api/db/connect.ts";
import { PAYOUT_ATOMIC, PRICE_ATOMIC } from "../../../api/money.ts";
import { BASE_USDC_ADDRESS } from "../../../contracts-abi/usdc.ts";
import type { TestChain } from "../chain.ts";
import { attachedReceipt, type CaughtMail } from "../mail.ts";
import { payoutsWithoutPayment } from "../moneyInvariant.ts";

const transferEvent = parseAbiItem(
  "event Transfer(address indexed from, address indexed to, uint256 value)",
);

export interface ChainTransfer {
  txHash: Hex;
  from: Address;
  to: Address;
  value: bigint;
  blockNumber: bigint;
}

/** USDC transfers as the chain holds them now (canonical, from block 0). */
export async function chainTransfers(
  chain: TestChain,
  filter: { from?: Address; to?: Address },
): Promise<ChainTransfer[]> {
  const logs = await chain.publicClient.getLogs({
    address: BASE_USDC_ADDRESS,
    event: transferEvent,
    args: filter,
    fromBlock: 0n,
    toBlock: "latest",
  });
  return logs.map((log) => ({
    txHash: log.transactionHash,
    from: getAddress(log.args.from as Address),
    to: getAddress(log.args.to as Address),
    value: log.args.value as bigint,
    blockNumber: log.blockNumber,
  }));
}

export interface Discrepancy {
  kind:
    | "qualifying_payment_unpaid"
    | "payment_paid_twice"
    | "below_price_payment_paid"
    | "payment_record_without_transfer"
    | "paid_claim_without_one_payout"
    | "payout_without_payment"
    | "payout_without_deep_payment"
    | "payout_not_one_usdc"
    | "claim_paid_out_twice"
    | "claim_not_terminal"
    | "paid_claim_not_completed"
    | "completed_claim_without_receipt"
    | "receipt_for_payout_not_on_chain"
    | "completed_mail_claim_without_receipt_mail";
  detail: string;
}

export interface Verdict {
  /** Transfers to pay_to on chain: at least the price, and below it. */
  qualifyingPayments: number;
  belowPricePayments: number;
  /** USDC transfers of the payout wallet on chain. */
  payouts: number;
  claims: Record<string, number>;
  receipts: number;
  /** Mail claims completed, and how many of them have their receipt mail in the catcher. */
  mailClaimsCompleted: number;
  mailClaimsWithReceiptMail: number;
  /** Receipt mails caught more than once for a claim (by design only after a crash mid-send). */
  receiptMailsSentTwice: number;
  discrepancies: Discrepancy[];
}

interface PaymentRow {
  claim_id: string;
  tx_hash: Hex;
  from_address: string;
  value: string;
}

/**
 * The suite's verdict, from the chain's logs and the database, whatever the clients saw:
 * 1. every transfer of at least the price to pay_to paid exactly one claim, and that claim
 *    earned exactly one 1-USDC transfer from the payout wallet, to its payout address;
 * 2. every transfer of the payout wallet is a payout of a claim that a transfer on chain paid;
 * 3. no claim is `paid` or `paying`, and every paid claim is `completed`;
 * 4. every completed claim has a receipt, and every receipt's payout is on chain;
 * 5. every completed mail claim's receipt (the one signed in the database) reached its sender by
 *    mail.
 */
export async function checkInvariants(
  chain: TestChain,
  sql: Database,
  options: {
    /** What the client knows of a transaction (its flow, claim and outcome), for the details. */
    describe?: (txHash: string) => string | undefined;
    /** Every mail the service sent, as the mail server received it. */
    mailCaught?: CaughtMail[];
    /** The service's CONFIRMATIONS: each payout's payment must be at least this deep. */
    confirmations?: number;
  } = {},
): Promise<Verdict> {
  const describe = options.describe ?? (() => undefined);
  const discrepancies: Discrepancy[] = [];
  const report = (kind: Discrepancy["kind"], detail: string) => {
    const known = /0x[0-9a-fA-F]{64}/.exec(detail)?.[0];
    const client = known ? describe(known.toLowerCase()) : undefined;
    discrepancies.push({ kind, detail: client ? `${detail} (client: ${client})` : detail });
  };

  const incoming = await chainTransfers(chain, { to: chain.payTo.address });
  const outgoing = await chainTransfers(chain, { from: chain.payout.address });
  const payments = await sql<PaymentRow[]>`
    select claim_id, tx_hash, from_address, value::text from app.payments`;
  const claims = await sql<{ id: string; status: string; payout_address: string }[]>`
    select id, status, payout_address from app.claims`;
  const payouts = await sql<{ claim_id: string; tx_hash: Hex; status: string }[]>`
    select claim_id, tx_hash, status from app.payouts`;
  const attempts = await sql<{ claim_id: string; tx_hash: Hex }[]>`
    select payouts.claim_id, attempts.tx_hash from app.payout_attempts attempts
    join app.payouts payouts using (nonce)`;
  const receipts = await sql<{ claim_id: string }[]>`select claim_id from app.receipts`;

  const claimById = new Map(claims.map((claim) => [claim.id, claim]));
  const sameTransfer = (payment: PaymentRow, transfer: ChainTransfer) =>
    payment.tx_hash === transfer.txHash.toLowerCase() &&
    payment.from_address === transfer.from.toLowerCase() &&
    BigInt(payment.value) === transfer.value;

  // Which claim each payout-wallet transaction belongs to (every attempt, replacements too).
  const claimOfPayoutTx = new Map<string, string>();
  for (const row of [...payouts, ...attempts])
    claimOfPayoutTx.set(row.tx_hash.toLowerCase(), row.claim_id);
  const outgoingByClaim = new Map<string, ChainTransfer[]>();
  for (const transfer of outgoing) {
    const claimId = claimOfPayoutTx.get(transfer.txHash.toLowerCase());
    if (!claimId) {
      report("payout_without_payment", `${transfer.txHash} is no payout of any claim`);
      continue;
    }
    outgoingByClaim.set(claimId, [...(outgoingByClaim.get(claimId) ?? []), transfer]);
    if (transfer.value !== PAYOUT_ATOMIC) {
      report("payout_not_one_usdc", `${transfer.txHash} sent ${transfer.value}`);
    }
    const claim = claimById.get(claimId);
    if (claim && transfer.to.toLowerCase() !== claim.payout_address) {
      report(
        "payout_without_payment",
        `${transfer.txHash} went to ${transfer.to}, not to ${claimId}`,
      );
    }
  }

  // 1. Each payment on chain: one claim, one payout.
  for (const transfer of incoming) {
    const paying = payments.filter((payment) => sameTransfer(payment, transfer));
    if (transfer.value < PRICE_ATOMIC) {
      if (paying.length > 0) report("below_price_payment_paid", transfer.txHash);
      continue;
    }
    if (paying.length === 0) {
      report(
        "qualifying_payment_unpaid",
        `${transfer.txHash} ${await whyUnpaid(sql, transfer.txHash)}`,
      );
    }
    if (paying.length > 1)
      report("payment_paid_twice", `${transfer.txHash}: ${paying.length} claims`);
    for (const payment of paying) {
      const paidOut = outgoingByClaim.get(payment.claim_id) ?? [];
      if (paidOut.length !== 1) {
        report(
          "paid_claim_without_one_payout",
          `${payment.claim_id}: ${paidOut.length} payouts on chain`,
        );
      }
    }
  }

  // 2. Each payout on chain: a claim paid by a transfer the chain has, paid out once.
  for (const [claimId, transfers] of outgoingByClaim) {
    if (transfers.length > 1) report("claim_paid_out_twice", `${claimId}: ${transfers.length}`);
    const payment = payments.find((row) => row.claim_id === claimId);
    const onChain = payment && incoming.some((transfer) => sameTransfer(payment, transfer));
    if (!onChain) report("payout_without_payment", `${claimId}: its payment is not on chain`);
  }
  for (const payment of payments) {
    if (!incoming.some((transfer) => sameTransfer(payment, transfer))) {
      report("payment_record_without_transfer", `${payment.claim_id} by ${payment.tx_hash}`);
    }
  }

  // The money's one invariant, as the attack suite checks it after each attack.
  for (const breach of await payoutsWithoutPayment(chain, sql, options.confirmations ?? 1)) {
    report("payout_without_deep_payment", breach);
  }

  // 3. States once the faults have stopped.
  const paidClaims = new Set(payments.map((payment) => payment.claim_id));
  for (const claim of claims) {
    if (claim.status === "paid" || claim.status === "paying") {
      report("claim_not_terminal", `${claim.id} is ${claim.status}`);
    } else if (paidClaims.has(claim.id) && claim.status !== "completed") {
      report("paid_claim_not_completed", `${claim.id} is ${claim.status}`);
    }
  }

  // 4. Receipts.
  const receiptClaims = new Set(receipts.map((receipt) => receipt.claim_id));
  for (const claim of claims) {
    if (claim.status === "completed" && !receiptClaims.has(claim.id)) {
      report("completed_claim_without_receipt", claim.id);
    }
  }
  for (const claimId of receiptClaims) {
    if ((outgoingByClaim.get(claimId) ?? []).length === 0) {
      report("receipt_for_payout_not_on_chain", claimId);
    }
  }

  // 5. Receipt mails of the mail flow.
  const mailClaims = await sql<{ id: string; email: string; signature: string }[]>`
    select claims.id, claims.email, receipts.signature from app.claims claims
    join app.receipts receipts on receipts.claim_id = claims.id
    where claims.flow = 'mail' and claims.status = 'completed'`;
  const receiptMails = (options.mailCaught ?? []).filter((mail) =>
    mail.parsed.attachments.some((file) => file.filename === "receipt.json"),
  );
  let mailClaimsWithReceiptMail = 0;
  let receiptMailsSentTwice = 0;
  for (const claim of mailClaims) {
    const delivered = receiptMails.filter(
      (mail) =>
        mail.to.includes(claim.email.toLowerCase()) &&
        attachedReceipt(mail).signature === claim.signature,
    );
    if (delivered.length === 0) {
      report("completed_mail_claim_without_receipt_mail", `${claim.id} to ${claim.email}`);
    } else {
      mailClaimsWithReceiptMail += 1;
      if (delivered.length > 1) receiptMailsSentTwice += 1;
    }
  }

  const statusCounts: Record<string, number> = {};
  for (const claim of claims) statusCounts[claim.status] = (statusCounts[claim.status] ?? 0) + 1;
  return {
    qualifyingPayments: incoming.filter((transfer) => transfer.value >= PRICE_ATOMIC).length,
    belowPricePayments: incoming.filter((transfer) => transfer.value < PRICE_ATOMIC).length,
    payouts: outgoing.length,
    claims: statusCounts,
    receipts: receipts.length,
    mailClaimsCompleted: mailClaims.length,
    mailClaimsWithReceiptMail,
    receiptMailsSentTwice,
    discrepancies,
  };
}

/**
 * Once the faults stop: every qualifying transfer recorded as a payment, nothing `paid` or
 * `paying`, no x402 settlement still open, every payout final (PAYOUT_CONFIRMATIONS deep),
 * every stored mail acted on and every queued mail sent.
 */
export async function settled(chain: TestChain, sql: Database): Promise<string | undefined> {
  const [open] = await sql<
    {
      in_flight: number;
      x402_open: number;
      not_final: number;
      mail_waiting: number;
      webhooks_waiting: number;
    }[]
  >`
    select
      (select count(*)::int from app.claims where status in ('paid', 'paying')) as in_flight,
      (select count(*)::int from app.x402_payments where status in ('settling', 'unknown'))
        as x402_open,
      (select count(*)::int from app.payouts
        where status in ('signed', 'broadcast') or (status = 'confirmed' and final_at is null))
        as not_final,
      (select count(*)::int from app.mail_messages where status = 'received')
        + (select count(*)::int from app.outbox where status = 'pending') as mail_waiting,
      (select count(*)::int from app.events where not fanned_out)
        + (select count(*)::int from app.webhook_deliveries where status = 'pending')
        as webhooks_waiting`;
  if (
    !open ||
    open.in_flight + open.x402_open + open.not_final + open.mail_waiting + open.webhooks_waiting > 0
  ) {
    return `in flight: ${JSON.stringify(open)}`;
  }
  const incoming = await chainTransfers(chain, { to: chain.payTo.address });
  const [row] = await sql<
    { payments: number }[]
  >`select count(*)::int as payments from app.payments`;
  const qualifying = incoming.filter((transfer) => transfer.value >= PRICE_ATOMIC).length;
  if ((row?.payments ?? 0) < qualifying)
    return `${qualifying - (row?.payments ?? 0)} payments unmatched`;
  return undefined;
}

/** What the database says of a transfer no claim holds: who named it, what the matcher decided. */
async function whyUnpaid(sql: Database, txHash: Hex): Promise<string> {
  const hash = txHash.toLowerCase();
  const named = await sql<{ id: string; status: string; tx_hash_signed: boolean }[]>`
    select id, status, tx_hash_signed from app.claims where tx_hash = ${hash}`;
  const unmatched = await sql<{ reason: string; claim_id: string | null }[]>`
    select reason, claim_id from app.unmatched_transfers where tx_hash = ${hash}`;
  return JSON.stringify({ named_by: named, unmatched });
}
