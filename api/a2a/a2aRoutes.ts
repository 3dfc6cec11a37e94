import { A2A_PROTOCOL_VERSION, A2A_VERSION_HEADER } from "@a2a-js/sdk";
import { A2A_ERROR_CODE } from "@a2a-js/sdk/errors";
import { DefaultRequestHandler } from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";
import { type RequestHandler, Router } from "express";
import type { SurfaceContext } from "../core/surfaceContext.ts";
import { claimClient } from "../rateLimits/clientAddress.ts";
import { agentHostGuard } from "../web/middleware/agentHosts.ts";
import { runAsClient } from "../web/requestClient.ts";
import { buildAgentCard } from "./agentCard.ts";
import { PayAndEarnExecutor } from "./agentExecutor.ts";
import { ClaimPushConfigStore, outboxPushSender } from "./pushNotifications.ts";
import { ClaimTaskStore } from "./taskStore.ts";

/** The A2A versions served (the agent card's interfaces). */
const A2A_VERSIONS = new Set([A2A_PROTOCOL_VERSION, "0.3"]);

/**
 * The SDK takes a request without `A2A-Version` for 0.3, so a header-less 1.0 `SendMessage`
 * would be unknown. Without the header, the method name decides: 0.3 names have a slash
 * (`message/send`, `tasks/get`), 1.0 names do not. A version not served is refused here with
 * the SDK's own error: the SDK refuses it too, but writes each one's stack to stderr first.
 */
function defaultA2aVersion(): RequestHandler {
  return (request, response, next) => {
    const requested = request.get(A2A_VERSION_HEADER);
    if (!requested) {
      const method = (request.body as { method?: unknown } | undefined)?.method;
      request.headers[A2A_VERSION_HEADER.toLowerCase()] =
        typeof method === "string" && method.includes("/") ? "0.3" : "1.0";
    } else if (!A2A_VERSIONS.has(requested)) {
      const id = (request.body as { id?: unknown } | undefined)?.id;
      response.status(200).json({
        jsonrpc: "2.0",
        id: typeof id === "string" || typeof id === "number" ? id : null,
        error: {
          code: A2A_ERROR_CODE.VERSION_NOT_SUPPORTED,
          message: `A2A-Version ${JSON.stringify(requested.slice(0, 20))} is not served: use ${[...A2A_VERSIONS].join(" or ")}`,
        },
      });
      return;
    }
    next();
  };
}

/**
 * A2A 1.0 (and 0.3 clients) with the official SDK: the agent card at
 * /.well-known/agent-card.json and JSON-RPC at POST /a2a. Tasks live in PostgreSQL and follow
 * their claims; no event bus outlives a request, so any replica can answer the next one.
 */
export function a2aRoutes({ core, config }: SurfaceContext): Router {
  const card = buildAgentCard(core);
  const requestHandler = new DefaultRequestHandler(
    card,
    new ClaimTaskStore(core),
    new PayAndEarnExecutor(core),
    undefined,
    // Push configs are endpoints of the webhook outbox, which delivers them: the SDK sends none.
    new ClaimPushConfigStore(core),
    outboxPushSender,
    undefined,
    undefined,
    { keepBusAliveStates: [] },
  );
  const router = Router();
  router.use(
    "/.well-known/agent-card.json",
    agentCardHandler({ agentCardProvider: async () => card, legacyCompat: { enabled: true } }),
  );
  router.use("/a2a", agentHostGuard(config), defaultA2aVersion(), (request, _response, next) =>
    // The executor creates claims without the HTTP request: it learns the client from here.
    runAsClient(claimClient(request.ip), next),
  );
  router.use(
    "/a2a",
    jsonRpcHandler({
      requestHandler,
      userBuilder: UserBuilder.noAuthentication,
      legacyCompat: { enabled: true },
    }),
  );
  return router;
}
