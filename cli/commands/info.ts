import type { Command } from "commander";
import { offerResponse } from "../../api/schemas/responses.ts";
import { createOutput } from "../output.ts";
import { ServiceClient, serviceUrl } from "../serviceClient.ts";
import type { GlobalOptions } from "./options.ts";

export function registerInfo(program: Command): void {
  program
    .command("info")
    .description("the offer: price, payout, network, USDC contract, pay_to, receipt signer")
    .addHelpText(
      "after",
      `
Examples:
  pay-and-earn info
  pay-and-earn info --service https://pay-and-earn.example --json`,
    )
    .action(async (_options: unknown, command: Command) => {
      const global = command.optsWithGlobals<GlobalOptions>();
      const output = createOutput(global);
      const offer = await new ServiceClient(serviceUrl(global.service)).get(
        "/api/info",
        offerResponse,
      );
      output.result(offer);
      output.line(offer.offer);
      output.line();
      output.fields([
        ["Service", `${offer.service} (${offer.site})`],
        [
          "Network",
          `${offer.network}, chain ${offer.chain_id}${offer.testnet ? " (testnet)" : ""}`,
        ],
        ["Price", `${offer.price_usdc} USDC`],
        ["Payout", `${offer.payout_usdc} USDC`],
        ["USDC", offer.usdc_contract],
        ["Pay to", offer.pay_to],
        ["Matching", `variant ${offer.matching_variant}, ${offer.confirmations} confirmations`],
        ["Receipt signer", offer.receipt_signer],
        [
          "x402",
          `${offer.x402.endpoint} (${offer.x402.protocol}, ${offer.x402.scheme}, ${offer.x402.network})`,
        ],
      ]);
      output.line();
      for (const step of offer.how_it_works) output.line(step);
    });
}
