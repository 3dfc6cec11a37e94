import { ONE_USDC, parseUsdc } from "../../api/money.ts";

/** One USDC in atomic units: `10n * USDC` is the price. */
export const USDC = ONE_USDC;

/** `"10.000123"` → atomic units (a claim's amount_due_usdc as the API shows it). */
export const atomic = parseUsdc;
