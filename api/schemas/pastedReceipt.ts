import { z } from "zod";

/**
 * A receipt pasted into the receipt checker (GET/POST /verify): JSON text, as downloaded
 * (`receipt.json` of GET /api/claims/{id}/receipt), as an x402 answer carries it (`receipt`
 * inside), or just `{ message, signature }`. Reduced to `{ message, signature }` for the same
 * check as POST /api/receipts/verify (`verifyReceiptRequest`), which judges those two fields.
 */
export const pastedReceiptInput = z
  .string({ message: "must be text" })
  .trim()
  .min(1, { message: "is empty: paste the receipt (receipt.json) here" })
  .max(16_000, { message: "must be at most 16000 characters" })
  .transform((text, context) => {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      context.issues.push({
        code: "custom",
        input: text,
        message:
          "is not JSON: paste the whole receipt as downloaded (receipt.json), with its message and signature",
      });
      return z.NEVER;
    }
  })
  .transform((value): unknown => {
    if (!isObject(value)) return value;
    const receipt = isObject(value.receipt) ? value.receipt : value;
    const { message, signature } = receipt;
    return {
      ...(message !== undefined ? { message } : {}),
      ...(signature !== undefined ? { signature } : {}),
    };
  });

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export const verifyPageForm = z.object({ receipt: pastedReceiptInput });
