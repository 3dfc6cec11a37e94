import type { Address, Hex } from "viem";
import { afterEach, describe, expect, it, vi } from "vitest";
import { checkHealth } from "../../api/health/checkHealth.ts";
import { createLogger } from "../../api/logger.ts";
import { settleAndPayCode } from "../../api/x402/settleAndPayCode.ts";
import { settleAndPayArtifact } from "../../contracts-abi/artifacts.ts";

// When the service asks again what SETTLE_AND_PAY_ADDRESS holds. The chain is a counting
// stand-in here: what is asked, and how often, is the subject; test/integration/settleAndPay.test.ts
// asks a real Anvil.

const ADDRESS = "0x00000000000000000000000000000000000a11ce" as Address;

function chainAnswering(...answers: Array<Hex | undefined | Error>) {
  const calls: number[] = [];
  return {
    calls,
    getCode: vi.fn(async () => {
      calls.push(Date.now());
      const answer = answers[Math.min(calls.length - 1, answers.length - 1)];
      if (answer instanceof Error) throw answer;
      return answer;
    }),
  };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("the check of SETTLE_AND_PAY_ADDRESS", () => {
  it("asks once for callers that come together, and never again once the code is seen", async () => {
    const chain = chainAnswering(settleAndPayArtifact.deployedBytecode);
    const check = settleAndPayCode(chain, { address: ADDRESS }, createLogger("silent"));
    const answers = await Promise.all([check.state(), check.state(), check.state()]);
    expect(answers).toEqual(["verified", "verified", "verified"]);
    expect(await check.state()).toBe("verified");
    expect(chain.getCode).toHaveBeenCalledTimes(1);
  });

  it("asks again 5 s after a failed read, and a minute after other code, and follows the answer", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const chain = chainAnswering(
      new Error("connection refused"),
      "0x6001",
      settleAndPayArtifact.deployedBytecode,
    );
    const check = settleAndPayCode(chain, { address: ADDRESS }, createLogger("silent"));
    expect(await check.state()).toBe("unreadable");
    vi.advanceTimersByTime(4_000);
    expect(await check.state()).toBe("unreadable");
    expect(chain.getCode).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(1_001);
    expect(await check.state()).toBe("wrong_code");
    vi.advanceTimersByTime(59_000);
    expect(await check.state()).toBe("wrong_code");
    expect(chain.getCode).toHaveBeenCalledTimes(2);
    vi.advanceTimersByTime(1_001);
    expect(await check.state()).toBe("verified");
    expect(chain.getCode).toHaveBeenCalledTimes(3);
  });

  it("health says settle_and_pay_not_deployed for other code only, not for a failed read", async () => {
    const reasonsWith = async (state: "wrong_code" | "unreadable" | "verified") =>
      (
        await checkHealth({
          sql: (async () => {
            throw new Error("no database here");
          }) as never,
          chain: {
            getChainId: async () => 8453,
            getBlockNumber: async () => 1n,
          } as never,
          chainId: 8453,
          maxIndexerLagBlocks: 10,
          settleAndPayCode: async () => state,
        })
      ).reasons;
    expect(await reasonsWith("wrong_code")).toContain("settle_and_pay_not_deployed");
    expect(await reasonsWith("unreadable")).not.toContain("settle_and_pay_not_deployed");
    expect(await reasonsWith("verified")).not.toContain("settle_and_pay_not_deployed");
  });
});
