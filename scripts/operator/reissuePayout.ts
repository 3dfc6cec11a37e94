import { parseServiceConfig } from "../../api/config/serviceConfig.ts";
import { ConfigError } from "../../api/config/settings.ts";
import { connectDatabase } from "../../api/db/connect.ts";
import { createPayoutRpc } from "../../api/payouts/payoutRpc.ts";
import { reissuePayout } from "../../api/payouts/reissuePayout.ts";

/**
 * `npm run payout:reissue -- <claim_id>`: re-issues, once, the payout of a claim whose nonce a
 * foreign transaction took (health: payout_nonce_taken), after checking the chain. Reads the
 * service's own configuration from the environment (and .env).
 */
const claimId = process.argv[2];
if (!claimId) {
  console.error("usage: npm run payout:reissue -- <claim_id>");
  process.exit(2);
}
let config: ReturnType<typeof parseServiceConfig>;
try {
  config = parseServiceConfig(process.env);
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  for (const line of error.problems) console.error(line);
  process.exit(2);
}
const sql = connectDatabase(config.databaseUrl, { max: 1, name: "pay-and-earn-operator" });
try {
  const outcome = await reissuePayout(
    { sql, wallet: config.payout.address, confirmations: config.payouts.confirmations },
    createPayoutRpc(config.chain.rpcUrl, config.chain.chainId),
    claimId,
  );
  const lines: Record<typeof outcome.type, string> = {
    reissued: `Re-issued: payout nonce ${"nonce" in outcome ? outcome.nonce : ""} is abandoned; the payout sender signs a new payout for ${claimId}.`,
    claim_not_found: `No claim ${claimId}.`,
    not_waiting_on_taken_nonce: `Not re-issued: ${"detail" in outcome ? outcome.detail : ""}.`,
    already_reissued: `Not re-issued: ${claimId} was already re-issued once; look at it by hand.`,
    not_final: `Not re-issued, not final yet: ${"detail" in outcome ? outcome.detail : ""}.`,
    attempt_mined: `Not re-issued: attempt ${"txHash" in outcome ? outcome.txHash : ""} was mined; the confirmer will store it.`,
  };
  const line = lines[outcome.type];
  if (outcome.type === "reissued") console.log(line);
  else console.error(line);
  process.exitCode = outcome.type === "reissued" ? 0 : 1;
} finally {
  await sql.end({ timeout: 5 });
}
