import { z } from "zod";
import {
  type Environment,
  httpUrl,
  parseWith,
  postgresUrl,
  wholeNumber,
} from "../../api/config/settings.ts";

/** `npm start`'s own settings: which local pieces to run and on which ports. */
const launcherSchema = z
  .object({
    RPC_URL: httpUrl.optional(),
    DATABASE_URL: postgresUrl.optional(),
    FORK_URL: httpUrl.optional(),
    DEVNET_DIR: z.string().min(1).default(".devnet"),
    ANVIL_PORT: wholeNumber(1, 65535).default(8545),
    BLOCK_TIME: z.coerce
      .number({ message: "is not a number" })
      .positive({ message: "must be more than 0 seconds" })
      .default(2),
    EMBEDDED_POSTGRES_PORT: wholeNumber(1, 65535).default(5433),
    PONDER_PORT: wholeNumber(1, 65535).default(42069),
    PORT: wholeNumber(1, 65535).default(3000),
    START_BLOCK: wholeNumber(0).optional(),
  })
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
