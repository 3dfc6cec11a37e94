import {
  type Address,
  getAbiItem,
  type Hex,
  isAddressEqual,
  type PublicClient,
  parseAbiItem,
  parseEventLogs,
} from "viem";
import { usdcAbi } from "../../contracts-abi/usdc.ts";

const AUTHORIZATION_USED = getAbiItem({ abi: usdcAbi, name: "AuthorizationUsed" });
/** EIP-3009's cancellation (FiatToken): the nonce is spent without a transfer. */
const AUTHORIZATION_CANCELED = parseAbiItem(
  "event AuthorizationCanceled(address indexed authorizer, bytes32 indexed nonce)",
);

type ChainReads = Pick<PublicClient, "readContract" | "getLogs" | "getTransactionReceipt">;

/** Where the token is and who is paid: only a transfer to pay_to settles an authorization. */
export interface TokenTerms {
  usdc: Address;
  payTo: Address;
}

/** A payer's verified EIP-3009 authorization, as its x402 record keeps it. */
export interface RecordedAuthorization {
  payer: Address;
  nonce: Hex;
  /** The verified value: only a transfer of exactly it is the settlement. */
  value: bigint;
}

/**
 * What the chain did with an authorization it shows used by `usedAt`, found from its own state
 * and one block's logs, never from the index: `settlement` when the use is a transfer of the
 * authorized value to pay_to (paired as the indexer pairs them, src/authorizationNonce.ts: the
 * `Transfer` right after the `AuthorizationUsed`), `elsewhere` when it was cancelled or moved
 * the money anywhere else, `undecided` when the answer is incomplete (the RPC cut the logs
 * short, or has no state that old): nothing is decided for good on it.
 *
 * Lost is for good, so only the chain may say it: Ponder reverts a reorganised block's rows at
 * once but moves its checkpoint back only with the next block it indexes
 * (docs/traps.md#ponder). In between, the index claims blocks whose transfers it no longer
 * holds, and a settlement mined again there looked "used elsewhere than pay_to". Used by the
 * settlement watcher (watchSettlements.ts) and the re-issue of a settle-and-pay
 * (api/payouts/reissueSettleAndPay.ts).
 */
export async function useOfAuthorization(
  chain: ChainReads,
  token: TokenTerms,
  authorization: RecordedAuthorization,
  usedAt: bigint,
): Promise<"settlement" | "elsewhere" | "undecided"> {
  const { payer, nonce } = authorization;
  const block = await blockOfFirstUse(chain, token.usdc, authorization, usedAt);
  if (block === null) return "undecided";
  const where = {
    address: token.usdc,
    args: { authorizer: payer, nonce },
    fromBlock: block,
    toBlock: block,
  };
  const [uses, cancels] = await Promise.all([
    chain.getLogs({ ...where, event: AUTHORIZATION_USED }),
    chain.getLogs({ ...where, event: AUTHORIZATION_CANCELED }),
  ]);
  if (cancels.length > 0) return "elsewhere";
  const use = uses[0];
  if (!use) return "undecided";
  const receipt = await chain.getTransactionReceipt({ hash: use.transactionHash });
  if (receipt.blockNumber !== block) return "undecided";
  const at = receipt.logs.findIndex((log) => log.logIndex === use.logIndex);
  const [next] = parseEventLogs({
    abi: usdcAbi,
    eventName: "Transfer",
    logs: at >= 0 ? receipt.logs.slice(at + 1, at + 2) : [],
  });
  const paysPayTo =
    next !== undefined &&
    isAddressEqual(next.address, token.usdc) &&
    isAddressEqual(next.args.from, payer) &&
    isAddressEqual(next.args.to, token.payTo) &&
    next.args.value === authorization.value;
  return paysPayTo ? "settlement" : "elsewhere";
}

/**
 * The block in which the chain first shows the authorization used, `usedAt` or below: steps
 * back from it, doubling, until a block shows it unused, then halves the gap. A use is recent
 * here (it was not there a few blocks ago), so this asks a handful of blocks near the head; null
 * when the node has no state that far back.
 */
async function blockOfFirstUse(
  chain: ChainReads,
  usdc: Address,
  authorization: { payer: Address; nonce: Hex },
  usedAt: bigint,
): Promise<bigint | null> {
  const usedIn = (block: bigint) =>
    block < 0n ? Promise.resolve(false) : authorizationUsed(chain, usdc, authorization, block);
  try {
    let used = usedAt;
    let step = 1n;
    let unused = used - step;
    while (await usedIn(unused)) {
      used = unused;
      step *= 2n;
      unused = used - step;
    }
    while (used - unused > 1n) {
      const middle = (used + unused) / 2n;
      if (await usedIn(middle)) used = middle;
      else unused = middle;
    }
    return used;
  } catch {
    return null;
  }
}

/** The token's `authorizationState`: whether the nonce is spent, at a block or at the head. */
export function authorizationUsed(
  chain: Pick<PublicClient, "readContract">,
  usdc: Address,
  authorization: { payer: Address; nonce: Hex },
  blockNumber?: bigint,
): Promise<boolean> {
  return chain.readContract({
    address: usdc,
    abi: usdcAbi,
    functionName: "authorizationState",
    args: [authorization.payer, authorization.nonce],
    ...(blockNumber !== undefined ? { blockNumber } : {}),
  });
}
