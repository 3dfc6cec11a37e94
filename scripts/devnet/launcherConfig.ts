import { z } from "zod";
import {
  type Environment,
  httpUrl,
  parseWith,
  postgresUrl,
  wholeNumber,
} from "../../api/config/settings.ts";

/** `npm start`'s own settings: which local pieces to run and on which ports. */
export const launcherSettings = {
  RPC_URL: httpUrl.optional(),
  DATABASE_URL: postgresUrl.optional(),
  FORK_URL: httpUrl
    .optional()
    .describe(
      "Devnet only: an RPC whose chain Anvil forks instead of starting an empty one (real USDC is used as it is there; the devnet accounts get theirs by a storage write).",
    ),
  DEVNET_DIR: z
    .string()
    .min(1)
    .default(".devnet")
    .describe(
      "Devnet only: the folder for `state.json`, the embedded PostgreSQL's data, the mail catcher's mails and the process records.",
    ),
  ANVIL_PORT: wholeNumber(1, 65535).default(8545).describe("Devnet only: Anvil's port."),
  BLOCK_TIME: z.coerce
    .number({ message: "is not a number" })
    .positive({ message: "must be more than 0 seconds" })
    .default(2)
    .describe("Devnet only: seconds between blocks (Base: 2)."),
  EMBEDDED_POSTGRES_PORT: wholeNumber(1, 65535)
    .default(5433)
    .describe("Devnet only: the embedded PostgreSQL's port (without `DATABASE_URL`)."),
  PONDER_PORT: wholeNumber(1, 65535).default(42069).describe("Ponder's HTTP port."),
  PORT: wholeNumber(1, 65535).default(3000),
  START_BLOCK: wholeNumber(0).optional(),
};

const launcherSchema = z
  .object(launcherSettings)
  .superRefine((settings, context) => {
    if (settings.RPC_URL && settings.FORK_URL) {
      context.addIssue({
        code: "custom",
        path: ["FORK_URL"],
        message: "only applies to the devnet; unset RPC_URL to fork with Anvil",
      });
    }
    if (settings.RPC_URL && settings.START_BLOCK === undefined) {
      context.addIssue({
        code: "custom",
        path: ["START_BLOCK"],
        message:
          "is required with RPC_URL (the block pay_to was first used; indexing from 0 takes hours)",
      });
    }
  })
  .transform((settings) => ({
    mode: settings.RPC_URL ? ("configured" as const) : ("devnet" as const),
    databaseUrl: settings.DATABASE_URL,
    forkUrl: settings.FORK_URL,
    devnetDirectory: settings.DEVNET_DIR,
    anvilPort: settings.ANVIL_PORT,
    blockTimeSeconds: settings.BLOCK_TIME,
    embeddedPostgresPort: settings.EMBEDDED_POSTGRES_PORT,
    ponderPort: settings.PONDER_PORT,
    servicePort: settings.PORT,
  }));

export type LauncherConfig = z.output<typeof launcherSchema>;

export function parseLauncherConfig(env: Environment = process.env): LauncherConfig {
  return parseWith(launcherSchema, env);
}
