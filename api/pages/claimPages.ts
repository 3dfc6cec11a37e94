import type { Request, Response } from "express";
import { explorerAddress } from "../chain/explorerLinks.ts";
import { claimView } from "../claims/claimView.ts";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import { claimClient } from "../rateLimits/clientAddress.ts";
import { CLAIM_FAILURE_REASONS } from "../reasons/reasonCatalog.ts";
import { describeRefusal } from "../reasons/refusal.ts";
import { receiptView } from "../receipts/receiptView.ts";
import { CLAIM_PAGE_SCRIPT } from "./claimPageScript.ts";
import { newNonce } from "./layout.ts";
import { answerProblem, fieldText, sendPage, wantsJson } from "./pageResponses.ts";
import { paymentUri, qrCodeSvg } from "./paymentQrCode.ts";
import { CLAIM_FORM_FIELDS, type ClaimFormValues, renderClaimFormPage } from "./renderClaimForm.ts";
import { renderClaimPage } from "./renderClaimPage.ts";

/** The start-a-claim form's POST, and the claim page. */
export function claimPages({ core, config }: SurfaceContext, mailEnabled: boolean) {
  const serviceName = config.serviceName;
  const verifyUrl = `${config.http.publicUrl}/api/receipts/verify`;

  /**
   * POST /claims: the form's fields as POST /api/claims takes them (an optional field left
   * empty is not given), through the same use-case: 303 to the new claim's page, or the form
   * again with every value kept and each error beside its field.
   */
  async function createFromForm(request: Request, response: Response) {
    const values: ClaimFormValues = {};
    const claimRequest: Record<string, unknown> = {};
    const body = request.body as Record<string, unknown> | undefined;
    for (const name of CLAIM_FORM_FIELDS) {
      const text = fieldText(body, name);
      values[name] = text;
      const sent = body?.[name];
      if (sent === undefined || (name !== "payout_address" && text.trim() === "")) continue;
      claimRequest[name] = sent;
    }
    const result = await core.createClaim(claimRequest, { client: claimClient(request.ip) });
    if (result.type === "created") {
      return response.redirect(303, `/claims/${result.claim.id}`);
    }
    const refusal = describeRefusal(result);
    if (refusal.retryAfterSeconds !== undefined) {
      response.set("retry-after", String(refusal.retryAfterSeconds));
    }
    sendPage(
      response,
      renderClaimFormPage({
        serviceName,
        values,
        problem: { code: refusal.code, title: refusal.title, detail: refusal.detail },
        errors: result.type === "invalid_request" ? result.errors : [],
        mailEnabled,
      }),
      { status: refusal.status },
    );
  }

  /** GET /claims/{claim_id}: the page; the API's JSON for a client that asks for JSON. */
  async function showClaim(request: Request, response: Response) {
    const claimId = String(request.params.claimId);
    const result = await core.getClaimWithReceipt(claimId);
    response.vary("Accept");
    if (result.type !== "claim") {
      const refusal = describeRefusal(result);
      return answerProblem(request, response, serviceName, "claim_not_found", {
        ...(refusal.detail !== undefined ? { detail: refusal.detail } : {}),
      });
    }
    const claim = claimView(config, result.claim);
    if (wantsJson(request)) return response.set("cache-control", "no-store").json(claim);

    const instructions = claim.payment_instructions;
    const uri = instructions
      ? paymentUri({
          usdcContract: instructions.usdc_contract,
          chainId: instructions.chain_id,
          payTo: instructions.pay_to,
          amountAtomic: instructions.amount_atomic,
        })
      : null;
    // A claim that can still move gets the script that reloads the page when it does.
    const nonce = result.final ? undefined : newNonce();
    sendPage(
      response,
      renderClaimPage({
        serviceName,
        claim,
        usdcContractUrl: explorerAddress(config, config.chain.usdcAddress),
        payment:
          uri && instructions
            ? {
                uri,
                qr: await qrCodeSvg(
                  uri,
                  `QR code: pay exactly ${instructions.amount_usdc} USDC on ${instructions.network} to ${instructions.pay_to}`,
                ),
              }
            : null,
        receipt: result.receipt ? receiptView(result.receipt, verifyUrl) : null,
        stopped: stoppedWords(claim),
        script: nonce ? { nonce, source: CLAIM_PAGE_SCRIPT } : null,
      }),
      nonce ? { scriptNonce: nonce } : {},
    );
  }

  return { createFromForm, showClaim };
}

/** Why a claim will not complete, in the catalog's words. */
function stoppedWords(claim: ReturnType<typeof claimView>) {
  if (claim.status === "expired") {
    const expired = describeRefusal({ type: "claim_expired" });
    return { title: expired.title, detail: expired.detail };
  }
  if (claim.status === "failed") {
    const reason = claim.failure_reason as keyof typeof CLAIM_FAILURE_REASONS | null;
    return {
      title: "The claim failed",
      detail: (reason && CLAIM_FAILURE_REASONS[reason]) ?? claim.next_step,
    };
  }
  return null;
}
