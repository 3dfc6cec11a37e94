import type { z } from "zod";

/** A failure the user can act on: `message` is the whole line they see. */
export class CliError extends Error {
  readonly exitCode: number;
  readonly code: string;
  constructor(code: string, message: string, exitCode = 1) {
    super(message);
    this.name = "CliError";
    this.code = code;
    this.exitCode = exitCode;
  }
}

/** What went wrong underneath, in one phrase (a fetch failure names its cause). */
export function reasonOfError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = (error as { cause?: unknown }).cause;
  if (cause instanceof Error && cause.message) return cause.message;
  return (error as { shortMessage?: string }).shortMessage ?? error.message;
}

/** `value` parsed by `schema`, or the CliError `refuse` makes of the first issue. */
export function parseOr<Schema extends z.ZodType>(
  schema: Schema,
  value: unknown,
  refuse: (issue: string) => CliError,
): z.output<Schema> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const path = issue?.path.join(".");
  throw refuse(`${path ? `${path}: ` : ""}${issue?.message ?? "is not valid"}`);
}

/** A claim that ended without its payout (failed, expired), as the one line of a failure. */
export function claimEnded(claim: {
  claim_id: string;
  status: string;
  failure_reason: string | null;
  next_step: string;
}): CliError {
  const reason = claim.failure_reason ? ` (${claim.failure_reason})` : "";
  return new CliError(
    `claim_${claim.status}`,
    `claim_${claim.status}: ${claim.claim_id} ${claim.status}${reason}: ${claim.next_step}`,
  );
}

/** Words as one sentence, ending with its full stop. */
export function sentence(words: string): string {
  return /[.!?]$/.test(words) ? words : `${words}.`;
}
