import {
  decodePaymentRequiredHeader,
  decodePaymentSignatureHeader,
  encodePaymentSignatureHeader,
} from "@x402/core/http";
import type { PaymentPayload, PaymentRequired, PaymentRequirements } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm";
import { wrapFetchWithPayment, x402Client } from "@x402/fetch";
import { type Hex, toHex } from "viem";
import { type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { transferWithAuthorizationTypes } from "./eip3009.ts";

/** The official client (@x402/fetch + @x402/evm) for a viem account; `cap` as a client sets it. */
export function payingFetch(privateKey: Hex, cap?: string) {
  const client = x402Client.fromConfig({
    schemes: [
      { network: "eip155:8453", client: new ExactEvmScheme(privateKeyToAccount(privateKey)) },
    ],
    ...(cap ? { spendControls: { maxAmountPerPayment: cap } } : {}),
  });
  return wrapFetchWithPayment(fetch, client);
}

/**
 * A PaymentPayload signed by the official client for terms a transport handed over (the MCP
 * tool's isError result, an A2A task's metadata), with the spend cap raised to $10.
 */
export async function officialPayment(
  privateKey: Hex,
  paymentRequired: PaymentRequired,
): Promise<PaymentPayload> {
  const client = x402Client.fromConfig({
    schemes: [
      { network: "eip155:8453", client: new ExactEvmScheme(privateKeyToAccount(privateKey)) },
    ],
    spendControls: { maxAmountPerPayment: "$10" },
  });
  return client.createPaymentPayload(paymentRequired);
}

/** The 402's terms, as the official client reads them (from the PAYMENT-REQUIRED header). */
export async function paymentTerms(url: string, body: unknown): Promise<PaymentRequired> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const header = response.headers.get("payment-required");
  if (response.status !== 402 || !header) throw new Error(`expected a 402, got ${response.status}`);
  return decodePaymentRequiredHeader(header);
}

/**
 * A PAYMENT-SIGNATURE header signed by hand, so a test can send what the official client never
 * would: another amount, a lapsed window, a signature by the wrong key.
 */
export async function handSignedPayment(
  account: PrivateKeyAccount,
  requirements: PaymentRequirements,
  overrides: {
    accepted?: Partial<PaymentRequirements>;
    value?: string;
    validAfter?: bigint;
    validBefore?: bigint;
    signer?: PrivateKeyAccount;
  } = {},
): Promise<string> {
  const now = BigInt(Math.floor(Date.now() / 1000));
  const accepted = { ...requirements, ...overrides.accepted };
  const authorization = {
    from: account.address,
    to: accepted.payTo as Hex,
    value: overrides.value ?? accepted.amount,
    validAfter: String(overrides.validAfter ?? 0n),
    validBefore: String(overrides.validBefore ?? now + 300n),
    nonce: toHex(crypto.getRandomValues(new Uint8Array(32))),
  };
  const signature = await (overrides.signer ?? account).signTypedData({
    domain: {
      name: "USD Coin",
      version: "2",
      chainId: 8453,
      verifyingContract: accepted.asset as Hex,
    },
    types: transferWithAuthorizationTypes,
    primaryType: "TransferWithAuthorization",
    message: {
      ...authorization,
      value: BigInt(authorization.value),
      validAfter: BigInt(authorization.validAfter),
      validBefore: BigInt(authorization.validBefore),
    },
  });
  return encodePaymentSignatureHeader({
    x402Version: 2,
    accepted,
    payload: { authorization, signature },
  });
}

/** The EIP-3009 nonce a PAYMENT-SIGNATURE header's authorization carries. */
export function authorizationNonceOf(header: string): Hex {
  const payload = decodePaymentSignatureHeader(header).payload as {
    authorization: { nonce: Hex };
  };
  return payload.authorization.nonce;
}
