import { getAddress, type Hex, isAddress } from "viem";
import { z } from "zod";
import { BASE_USDC_ADDRESS } from "../../contracts-abi/usdc.ts";

/**
 * What every process's settings are made of: the value types, the one error a broken
 * configuration raises, and the parse that turns an environment into settings. Each process
 * has its own schema beside this file (service, indexer); the launcher's is in scripts/.
 */

export const address = z
  .string()
  .refine((value) => isAddress(value, { strict: true }), "is not an address")
  .transform((value) => getAddress(value));

export const privateKey = z
  .string()
  .regex(/^0x[0-9a-fA-F]{64}$/, "is not a private key (0x and 64 hex digits)")
  .transform((value) => value as Hex);

/** A URL whose scheme `protocol` matches (`https:`, with the colon, as `URL` gives it). */
const urlWithScheme = (protocol: RegExp, message: string) =>
  z.string().refine((value) => URL.canParse(value) && protocol.test(new URL(value).protocol), {
    message,
  });

export const httpUrl = urlWithScheme(/^https?:$/, "is not an http(s) URL");
export const webSocketUrl = urlWithScheme(/^wss?:$/, "is not a ws(s) URL");
export const postgresUrl = urlWithScheme(/^postgres(ql)?:$/, "is not a postgres:// URL");

export const wholeNumber = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z.coerce
    .number({ message: "is not a number" })
    .int({ message: "is not a whole number" })
    .min(min, { message: `must be at least ${min}` })
    .max(max, { message: `must be at most ${max}` });

/**
 * The chain and database every process that touches them needs. Each setting says what it
 * means (`.describe`): docs/configuration.md is written from the schemas (`npm run docs:config`).
 */
export const chainSettings = {
  RPC_URL: httpUrl.describe(
    "Base's JSON-RPC endpoint. Set, `npm start` runs no devnet and uses this chain; unset, it runs Anvil and passes its address.",
  ),
  CHAIN_ID: wholeNumber(1).default(8453).describe("Chain id the RPC must serve (Base: 8453)."),
  USDC_ADDRESS: address.default(BASE_USDC_ADDRESS).describe("The USDC contract (Base's)."),
  PAY_TO: address.describe(
    "Address that receives payments. The devnet's `pay_to` account under `npm start`.",
  ),
  DATABASE_URL: postgresUrl.describe(
    "PostgreSQL. Unset, `npm start` runs an embedded PostgreSQL under `DEVNET_DIR` (devnet only). Never point a devnet and a Base deployment at the same database.",
  ),
};

/** A configuration that cannot run; `problems` holds one readable line per broken setting. */
export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`Invalid configuration:\n${problems.map((problem) => `  ${problem}`).join("\n")}`);
    this.name = "ConfigError";
    this.problems = problems;
  }
}

export type Environment = Record<string, string | undefined>;

export function parseWith<Schema extends z.ZodType>(
  schema: Schema,
  env: Environment,
): z.output<Schema> {
  // An empty value means "not set", as in most .env tooling.
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== ""));
  const result = schema.safeParse(present, { reportInput: true });
  if (result.success) return result.data;
  throw new ConfigError(result.error.issues.map(describeIssue));
}

function describeIssue(issue: z.core.$ZodIssue): string {
  const name = issue.path.join(".");
  if (issue.code === "invalid_type" && issue.input === undefined) return `${name} is required`;
  return `${name} ${issue.message}`;
}
