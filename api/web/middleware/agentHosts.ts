import type { RequestHandler } from "express";
import type { ServiceConfig } from "../../config/serviceConfig.ts";
import { sendJsonRpcError } from "./jsonRpcErrors.ts";

const LOCAL_HOSTS = ["localhost", "127.0.0.1", "[::1]", "::1"];

/** The host names /mcp and /a2a answer to: PUBLIC_URL's, localhost, AGENT_ALLOWED_HOSTS. */
export function allowedAgentHosts(config: ServiceConfig): Set<string> {
  return new Set([
    new URL(config.http.publicUrl).hostname.toLowerCase(),
    ...LOCAL_HOSTS,
    ...config.agents.allowedHosts,
  ]);
}

function hostnameOf(hostHeader: string): string | null {
  try {
    return new URL(`http://${hostHeader}`).hostname.toLowerCase();
  } catch {
    return null;
  }
}

/**
 * DNS-rebinding protection for the agent endpoints (MCP's transport rules): the Host a request
 * names (X-Forwarded-Host when TRUST_PROXY trusts the proxy, as Express reads it) must be one
 * of ours, and so must the Origin a browser adds. Anything else is a 403 JSON-RPC error,
 * before any server sees the request.
 */
export function agentHostGuard(config: ServiceConfig): RequestHandler {
  const allowed = allowedAgentHosts(config);
  return (request, response, next) => {
    // Express reads X-Forwarded-Host instead of Host only from a proxy TRUST_PROXY trusts.
    const host = request.hostname ? hostnameOf(request.hostname) : null;
    if (!host || !allowed.has(host)) {
      return sendJsonRpcError(response, 403, -32000, "Forbidden: this Host is not served here");
    }
    const origin = request.get("origin");
    if (origin !== undefined) {
      let originHost: string | null = null;
      try {
        originHost = new URL(origin).hostname.toLowerCase();
      } catch {
        originHost = null;
      }
      if (!originHost || !allowed.has(originHost)) {
        return sendJsonRpcError(response, 403, -32000, "Forbidden: this Origin is not allowed");
      }
    }
    next();
  };
}
