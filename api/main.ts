import { parseServiceConfig } from "./config/serviceConfig.ts";
import { ConfigError } from "./config/settings.ts";
import { createLogger } from "./logger.ts";
import { redactUrlsIn } from "./redaction.ts";
import { startService } from "./service.ts";

/** `node api/main.ts`: the service as a process. Settings come from the environment only. */

let config: ReturnType<typeof parseServiceConfig>;
try {
  config = parseServiceConfig(process.env);
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  for (const line of error.problems) console.error(line);
  process.exit(1);
}

const logger = createLogger(config.logLevel);
// A library promise nobody awaits (the x402 facilitator's, when the RPC drops mid-verify) must
// not take the whole service down; log it and keep serving.
process.on("unhandledRejection", (reason) => {
  logger.error({ err: reason }, "unhandled promise rejection");
});
try {
  const service = await startService(config, logger);
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "stopping");
    await service.stop();
    process.exit(0);
  };
  process.once("SIGTERM", () => void stop("SIGTERM"));
  process.once("SIGINT", () => void stop("SIGINT"));
} catch (error) {
  // The message may name the RPC or database URL (a key in its path): printed without it.
  console.error(redactUrlsIn(`The service could not start: ${(error as Error).message}`));
  process.exit(1);
}
