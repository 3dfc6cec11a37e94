import type { ServiceConfig } from "../config/serviceConfig.ts";

/** The CAIP-2 id of the chain the service is paid on (`eip155:8453`), as x402 names networks. */
export function networkId(config: Pick<ServiceConfig, "chain">): `eip155:${number}` {
  return `eip155:${config.chain.chainId}`;
}

/** The network's name as people know it. */
export function networkName(config: Pick<ServiceConfig, "chain">): string {
  return config.chain.chainId === 8453 ? "Base" : `chain ${config.chain.chainId}`;
}
