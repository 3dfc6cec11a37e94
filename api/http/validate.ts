import type { z } from "zod";
import { type Problem, problem } from "./problem.ts";

/** A zod parse as a value or an `invalid_request` problem with one error per field. */
export function validate<Schema extends z.ZodType>(
  schema: Schema,
  input: unknown,
  what = "The request",
): { ok: true; value: z.output<Schema> } | { ok: false; problem: Problem } {
  if (input === undefined || input === null || typeof input !== "object" || Array.isArray(input)) {
    return {
      ok: false,
      problem: problem("invalid_request", 400, `${what} is not valid`, {
        detail: "The body must be a JSON object.",
        errors: [{ field: "", message: "must be a JSON object" }],
      }),
    };
  }
  const result = schema.safeParse(input, { reportInput: true });
  if (result.success) return { ok: true, value: result.data };
  const errors = result.error.issues.map((issue) => ({
    field: issue.path.join("."),
    message:
      issue.code === "unrecognized_keys"
        ? `unknown field(s): ${issue.keys.join(", ")}`
        : issue.code === "invalid_type" && issue.input === undefined
          ? "is required"
          : issue.message,
  }));
  return {
    ok: false,
    problem: problem("invalid_request", 400, `${what} is not valid`, {
      detail: errors.map((error) => `${error.field || "body"}: ${error.message}`).join("; "),
      errors,
    }),
  };
}
