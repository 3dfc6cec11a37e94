import type { z } from "zod";
import type { FieldError } from "../reasons/refusal.ts";

export type ParsedInput<Value> = { ok: true; value: Value } | { ok: false; errors: FieldError[] };

/**
 * Parses what a client sent (a JSON body, a query, a tool's arguments) with a request schema:
 * the value, or one error per field in words a client can act on. Every surface's input goes
 * through here, so an error reads the same on REST, GraphQL, MCP, A2A and by mail.
 */
export function parseInput<Schema extends z.ZodType>(
  schema: Schema,
  input: unknown,
): ParsedInput<z.output<Schema>> {
  if (input === undefined || input === null || typeof input !== "object" || Array.isArray(input)) {
    return { ok: false, errors: [{ field: "", message: "must be a JSON object" }] };
  }
  const result = schema.safeParse(input, { reportInput: true });
  if (result.success) return { ok: true, value: result.data };
  return {
    ok: false,
    errors: result.error.issues.map((issue) => ({
      field: issue.path.join("."),
      message:
        issue.code === "unrecognized_keys"
          ? `unknown field(s): ${issue.keys.join(", ")}`
          : issue.code === "invalid_type" && issue.input === undefined
            ? "is required"
            : issue.message,
    })),
  };
}
