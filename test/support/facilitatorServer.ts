import type { AddressInfo } from "node:net";
import express from "express";
import { parseServiceConfig } from "../../api/config/serviceConfig.ts";
import { createFacilitator } from "../../api/x402/facilitator.ts";
import type { TestChain } from "./chain.ts";
import { testServiceEnv } from "./service.ts";

/**
 * A remote x402 facilitator for tests: the official SDK's facilitator behind the HTTP API that
 * HTTPFacilitatorClient speaks (POST /verify, POST /settle, GET /supported), on a free port.
 */
export async function startFacilitatorServer(
  chain: TestChain,
  databaseUrl: string,
  options: {
    /** Answer every settle with this failure (after a real verify), settling nothing. */
    refuseSettle?: string;
    /** Settle for real, then answer with this failure anyway: a facilitator that is wrong. */
    failAfterSettling?: string;
  } = {},
) {
  const config = parseServiceConfig(testServiceEnv(chain, databaseUrl));
  const facilitator = createFacilitator(config);
  if (!facilitator) throw new Error("no facilitator");
  const app = express();
  app.use(express.json());
  app.get("/supported", async (_request, response) => {
    response.json(await facilitator.client.getSupported());
  });
  app.post("/verify", async (request, response) => {
    response.json(
      await facilitator.client.verify(
        request.body.paymentPayload,
        request.body.paymentRequirements,
      ),
    );
  });
  app.post("/settle", async (request, response) => {
    if (options.refuseSettle) {
      response.json({
        success: false,
        errorReason: options.refuseSettle,
        transaction: "",
        network: "eip155:8453",
      });
      return;
    }
    const settled = await facilitator.client.settle(
      request.body.paymentPayload,
      request.body.paymentRequirements,
    );
    if (options.failAfterSettling) {
      response.json({
        success: false,
        errorReason: options.failAfterSettling,
        transaction: "",
        network: "eip155:8453",
      });
      return;
    }
    response.json(settled);
  });
  const server = app.listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
