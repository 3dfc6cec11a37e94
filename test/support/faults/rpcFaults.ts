import type { RpcCall, RpcFault } from "../rpcProxy.ts";

/** What the suite injects at random: every fault but a test's deliberate hold or answer. */
type RandomFault = Exclude<RpcFault, { kind: "hold" | "answer" }>;
export type RpcFaultKind = Exclude<RandomFault["kind"], "pass">;

/**
 * A rule for the JSON-RPC proxy that injects each kind of fault into a share of the calls:
 * errors (the node refused), errors after forwarding (the node took it, the client thinks it
 * failed), added latency, dropped responses (forwarded, no answer), timeouts (no answer for
 * longer than the service's RPC timeout) and log answers cut short (`rewrite`: the last log
 * dropped, no error). Counts what it injected, by kind.
 */
export function createRpcFaults(options: { rate: number; timeoutMs: number }) {
  const injected: Record<RpcFaultKind, number> = {
    error: 0,
    error_after_forwarding: 0,
    delay: 0,
    drop_response: 0,
    timeout: 0,
    rewrite: 0,
  };
  let enabled = false;

  function rule(call: RpcCall): RpcFault {
    if (!enabled) return { kind: "pass" };
    const fault =
      call.method === "eth_sendRawTransaction"
        ? sendingFault()
        : call.method === "eth_getLogs"
          ? logsFault()
          : readingFault();
    // A cut-short answer counts once it has cut a log (logsFault): an empty answer loses nothing.
    if (fault.kind !== "pass" && fault.kind !== "rewrite") injected[fault.kind] += 1;
    return fault;
  }

  /** Sends are few and matter most: three times the rate, and half of it "sent, but failed". */
  function sendingFault(): RandomFault {
    if (Math.random() >= Math.min(1, options.rate * 3)) return { kind: "pass" };
    const roll = Math.random();
    if (roll < 0.5) return { kind: "error_after_forwarding", message: "injected after forwarding" };
    if (roll < 0.7) return { kind: "drop_response" };
    if (roll < 0.85) return { kind: "error", message: "injected by the fault suite" };
    return { kind: "delay", ms: 50 + Math.floor(Math.random() * 700) };
  }

  /**
   * Log reads also come back cut short without an error (a provider's truncation). Until one
   * answer has lost a log, every log read is cut: a short run makes few log reads, and at the
   * random rate alone one run in a few cut none (the run then proved nothing about it).
   */
  function logsFault(): RandomFault {
    if (injected.rewrite === 0 || Math.random() < options.rate / 2) {
      return {
        kind: "rewrite",
        change: (logs) => {
          if (!Array.isArray(logs) || logs.length === 0) return logs;
          injected.rewrite += 1;
          return logs.slice(0, -1);
        },
      };
    }
    return readingFault();
  }

  function readingFault(): RandomFault {
    if (Math.random() >= options.rate) return { kind: "pass" };
    const roll = Math.random();
    if (roll < 0.35) return { kind: "delay", ms: 50 + Math.floor(Math.random() * 700) };
    if (roll < 0.7) return { kind: "error", message: "injected by the fault suite" };
    if (roll < 0.92) return { kind: "drop_response" };
    return { kind: "timeout", ms: options.timeoutMs };
  }

  return {
    rule,
    injected,
    enable(): void {
      enabled = true;
    },
    disable(): void {
      enabled = false;
    },
  };
}
