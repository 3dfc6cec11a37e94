import QRCode from "qrcode";
import { html, htmlText, type SafeHtml, trustedHtml } from "../html/safeHtml.ts";

/** What a wallet needs to pay one claim: the token, the chain, the recipient, the exact amount. */
export interface PaymentRequest {
  usdcContract: string;
  chainId: number;
  payTo: string;
  /** Atomic units (USDC has 6 decimals), as a decimal integer string. */
  amountAtomic: string;
}

/**
 * The EIP-681 URI of an ERC-20 transfer: `ethereum:<token>@<chain id>/transfer?address=<to>&
 * uint256=<atomic amount>`. Wallets that read it fill in the token, the network, the recipient
 * and the exact amount, so nothing has to be typed.
 */
export function paymentUri(request: PaymentRequest): string {
  if (!/^[0-9]+$/.test(request.amountAtomic)) {
    throw new RangeError(`${request.amountAtomic} is not an atomic amount`);
  }
  return (
    `ethereum:${request.usdcContract}@${request.chainId}/transfer` +
    `?address=${request.payTo}&uint256=${request.amountAtomic}`
  );
}

/** What qrcode's SVG renderer writes: one svg of two paths (background, modules), nothing else. */
const QR_SVG =
  /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg" viewBox="0 0 \d+ \d+" shape-rendering="crispEdges"><path fill="#ffffff" d="[-\d.hvHVMmz ]+"\/><path stroke="#000000" d="[-\d.hvHVMmz ]+"\/><\/svg>$/;

/**
 * The QR code of `uri` as inline SVG, made on the server by `qrcode` (error correction M, the
 * standard 4-module quiet zone, black on white whatever the colour scheme). The library's
 * markup is inserted as it is only after it is checked to be the two paths it always writes.
 */
export async function qrCodeSvg(uri: string, label: string): Promise<SafeHtml> {
  const svg = (
    await QRCode.toString(uri, { type: "svg", errorCorrectionLevel: "M", margin: 4 })
  ).trim();
  if (!QR_SVG.test(svg)) throw new Error("qrcode wrote an SVG of an unexpected shape");
  // A function, so that no `$` in the label is read as a replacement pattern.
  const labelled = svg.replace("<svg ", () =>
    htmlText(html`<svg role="img" aria-label="${label}" `),
  );
  return trustedHtml(labelled);
}
