import type { Request, Response } from "express";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import { describeRefusal, invalidRequest, type Refusal } from "../reasons/refusal.ts";
import { receiptVerdictView, receiptView } from "../receipts/receiptView.ts";
import { parseInput } from "../schemas/parseInput.ts";
import { verifyPageForm } from "../schemas/pastedReceipt.ts";
import { fieldText, sendPage } from "./pageResponses.ts";
import { renderVerifyPage, type VerifyPageView } from "./renderVerifyPage.ts";

/** The receipt checker: GET /verify (empty, or `?claim_id=`) and POST /verify (a pasted receipt). */
export function verifyPages({ core, config }: SurfaceContext) {
  const verifyUrl = `${config.http.publicUrl}/api/receipts/verify`;
  const base = { serviceName: config.serviceName, receiptSigner: config.receipts.signer };

  function answer(response: Response, view: Omit<VerifyPageView, keyof typeof base>, status = 200) {
    sendPage(response, renderVerifyPage({ ...base, ...view }), { status });
  }

  function refused(response: Response, pasted: string, refusal: Refusal) {
    const described = describeRefusal(refusal);
    answer(
      response,
      {
        pasted,
        verdict: null,
        problem: {
          code: described.code,
          title: described.title,
          detail: described.detail,
          errors: refusal.type === "invalid_request" ? refusal.errors : [],
        },
      },
      described.status,
    );
  }

  /** The verdict on `{ message, signature }`, or why they cannot be judged. */
  async function judge(response: Response, pasted: string, receipt: unknown) {
    const result = await core.verifyReceipt(receipt);
    if (result.type !== "verdict") return refused(response, pasted, result);
    answer(response, { pasted, verdict: receiptVerdictView(result.verdict), problem: null });
  }

  async function showChecker(request: Request, response: Response) {
    const claimId = request.query.claim_id;
    if (claimId === undefined || claimId === "") {
      return answer(response, { pasted: "", verdict: null, problem: null });
    }
    const result = await core.getReceipt(typeof claimId === "string" ? claimId : "");
    if (result.type !== "receipt") return refused(response, "", result);
    const receipt = receiptView(result.receipt, verifyUrl);
    await judge(response, JSON.stringify(receipt, null, 2), {
      message: receipt.message,
      signature: receipt.signature,
    });
  }

  async function checkPasted(request: Request, response: Response) {
    const pasted = fieldText(request.body, "receipt");
    const input = parseInput(verifyPageForm, request.body ?? {});
    if (!input.ok) return refused(response, pasted, invalidRequest(input.errors));
    await judge(response, pasted, input.value.receipt);
  }

  return { showChecker, checkPasted };
}
