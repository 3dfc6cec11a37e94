import { z } from "zod";
import { CliError, parseOr } from "../errors.ts";

/** Options every command takes (set on the program). */
export interface GlobalOptions {
  service?: string;
  json?: boolean;
}

/** An option checked by the same zod schema the service checks it with: the same words. */
export function checkedOption<Schema extends z.ZodType>(
  flag: string,
  schema: Schema,
  value: unknown,
): z.output<Schema> {
  return parseOr(
    schema,
    value,
    (issue) => new CliError("invalid_option", `invalid_option: ${flag} ${issue}`, 2),
  );
}

/** A whole number of seconds, 0 or more. */
export const seconds = z.coerce
  .number({ message: "is not a number" })
  .int({ message: "is not a whole number" })
  .min(0, { message: "must be 0 or more" });
