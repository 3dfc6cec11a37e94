/** One line of `doctor`: a verdict on one check, and what to do about a warn or a fail. */
export type Verdict = "ok" | "warn" | "fail";

export interface Finding {
  check: string;
  verdict: Verdict;
  detail: string;
  /** What to do about a warn or a fail. */
  action?: string;
}

/** How long one check may wait on the RPC, the database or the service. */
export const CHECK_TIMEOUT_MS = 5_000;

export const ok = (check: string, detail: string): Finding => ({
  check,
  verdict: "ok",
  detail,
});
export const warn = (check: string, detail: string, action: string): Finding => ({
  check,
  verdict: "warn",
  detail,
  action,
});
export const fail = (check: string, detail: string, action: string): Finding => ({
  check,
  verdict: "fail",
  detail,
  action,
});
