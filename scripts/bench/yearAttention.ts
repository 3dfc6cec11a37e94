import type { Database } from "../../api/db/connect.ts";
import { checkAttentionThrough } from "../../api/health/attentionChecked.ts";

/**
 * The attention counts' marks over the year's rows, as the service's attention-check worker keeps
 * them while the year goes by (docs/operating.md#attention-checked-through). The year's transfers
 * share the devnet's first blocks, which Ponder has not finalized yet (it finalizes 30 blocks
 * behind its head on chain 8453, once its head is 60 past the last finalized block): blocks are
 * mined until it has, then the worker's steps run until they have caught up.
 */
export async function passYearAttention(
  sql: Database,
  chain: { mine: (args: { blocks: number }) => Promise<unknown> },
  options: { chainId: number; confirmations: number; log: (line: string) => void },
) {
  const [top] = await sql<{ block: string | null }[]>`
    select max(block_number)::text as block from chain.outgoing_transfer`;
  const highest = BigInt(top?.block ?? "0");
  const finalized = async () => {
    const [row] = await sql<{ block: string }[]>`
      select substring(finalized_checkpoint from 27 for 16)::int8::text as block
      from chain._ponder_checkpoint where chain_id = ${options.chainId}`;
    return BigInt(row?.block ?? "0");
  };
  const deadline = Date.now() + 120_000;
  while ((await finalized()) < highest) {
    if (Date.now() > deadline) throw new Error(`Ponder did not finalize block ${highest}`);
    await chain.mine({ blocks: 30 });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
  const started = performance.now();
  let steps = 0;
  let longestMs = 0;
  for (let again = true; again; steps++) {
    const stepStarted = performance.now();
    const step = await checkAttentionThrough(sql, options);
    longestMs = Math.max(longestMs, performance.now() - stepStarted);
    again = step.moved && !step.caughtUp;
  }
  const seconds = (performance.now() - started) / 1000;
  options.log(
    `  attention checked through the year: ${seconds.toFixed(1)} s, ${steps} steps, the longest ${longestMs.toFixed(0)} ms`,
  );
  return { seconds, steps, longestMs };
}
