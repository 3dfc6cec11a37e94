import type { ServiceConfig } from "../config/serviceConfig.ts";

/** The block explorer's page of a transaction, or null when there is no transaction. */
export function explorerTx(
  config: Pick<ServiceConfig, "chain">,
  hash: string | null,
): string | null {
  return hash ? `${config.chain.explorerUrl}/tx/${hash}` : null;
}

/** The block explorer's page of an address (give it checksummed). */
export function explorerAddress(config: Pick<ServiceConfig, "chain">, address: string): string {
  return `${config.chain.explorerUrl}/address/${address}`;
}
