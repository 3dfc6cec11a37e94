import type { Step } from "../steps.ts";
import {
  claimPlanStep,
  confirmationsStep,
  createClaimStep,
  sendPaymentStep,
} from "./claimSteps.ts";
import type { EarnContext } from "./earnContext.ts";
import { checkWalletStep, payoutStep, readOfferStep, receiptStep } from "./sharedSteps.ts";
import { x402PayStep, x402PlanStep } from "./x402Steps.ts";

/** The steps of `earn`, in order, for each way to pay. */
export function earnSteps(via: "claim" | "x402"): Step<EarnContext>[] {
  if (via === "x402") {
    return [readOfferStep, checkWalletStep, x402PlanStep, x402PayStep, payoutStep, receiptStep];
  }
  return [
    readOfferStep,
    checkWalletStep,
    claimPlanStep,
    createClaimStep,
    sendPaymentStep,
    confirmationsStep,
    payoutStep,
    receiptStep,
  ];
}
