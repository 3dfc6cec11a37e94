import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { dirname, join, relative } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { waitForExit } from "./processes.ts";
import { recordProcess } from "./processRecords.ts";

const repositoryRoot = join(import.meta.dirname, "..", "..");

export interface PonderOptions {
  /** The indexer settings (RPC_URL, PAY_TO, …; see api/config.ts) and DATABASE_URL. */
  env: Record<string, string | undefined>;
  port: number;
  schema: string;
  viewsSchema?: string;
  /** The lowest level of Ponder's lines passed to `onLog` and kept for errors (default warn). */
  logLevel?: "error" | "warn" | "info" | "debug";
  /** Where Ponder's log lines go; default: dropped. */
  onLog?: (line: string) => void;
}

export interface RunningPonder {
  /**
   * Where Ponder listens, once it has said so (its `Created HTTP server` line): the port it was
   * given, or the next one when that was taken. Before that, the port it was given.
   */
  readonly url: string;
  process: ChildProcess;
  waitUntilReady(timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/** What the indexer reads (api/config/indexerConfig.ts, ponder.config.ts) and Ponder itself. */
const INDEXER_SETTINGS = [
  "RPC_URL",
  "CHAIN_ID",
  "USDC_ADDRESS",
  "PAY_TO",
  "PAYOUT_ADDRESS",
  "START_BLOCK",
  "INDEXER_POLLING_INTERVAL_MS",
  "INDEXER_WS_URL",
  "DATABASE_URL",
  "DATABASE_SCHEMA",
];
/** What any process may need from its environment: paths, locale, proxies, certificates. */
const PROCESS_SETTINGS = [
  "PATH",
  "HOME",
  "TMPDIR",
  "LANG",
  "LC_ALL",
  "TZ",
  "NODE_ENV",
  "NODE_OPTIONS",
  "NODE_COMPILE_CACHE",
  "NODE_EXTRA_CA_CERTS",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy",
];

/**
 * The part of an environment Ponder may see: what it indexes with, Ponder's own PONDER_*
 * settings and what any process needs, nothing else. An allow list, not a deny list: keys and
 * secrets the indexer has no use for (PAYOUT_PRIVATE_KEY, CDP_API_KEY_SECRET, METRICS_TOKEN,
 * SMTP passwords, whatever a later setting adds) never reach it or its logs. Never PORT: Ponder
 * reads it and it would win over --port.
 */
export function indexerEnvironment(
  env: Record<string, string | undefined>,
): Record<string, string> {
  const allowed = new Set([...INDEXER_SETTINGS, ...PROCESS_SETTINGS]);
  const picked: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    if (value === undefined) continue;
    if (allowed.has(key) || (key.startsWith("PONDER_") && key !== "PONDER_PORT")) {
      picked[key] = value;
    }
  }
  return picked;
}

/** Ponder's ready check: 200 once the backfill is done and the views exist. */
export function startPonder(options: PonderOptions): RunningPonder {
  // `ponder` exports no bin path; the CLI sits beside its ESM entry point.
  const ponderCli = join(dirname(fileURLToPath(import.meta.resolve("ponder"))), "bin", "ponder.js");
  const child = spawn(
    process.execPath,
    [
      ponderCli,
      "start",
      "--schema",
      options.schema,
      "--views-schema",
      options.viewsSchema ?? "chain",
      "--port",
      String(options.port),
      "--hostname",
      "127.0.0.1",
      "--log-format",
      "json",
      // Info at least, whatever the caller wants to see: the line saying which port Ponder's
      // server took is an info line (see `serverPortOf`).
      "--log-level",
      options.logLevel === "debug" ? "debug" : "info",
    ],
    {
      cwd: repositoryRoot,
      env: { ...options.env, PONDER_TELEMETRY_DISABLED: "true", NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    },
  );
  recordProcess(child, "ponder");
  const shownFrom = LEVELS[options.logLevel ?? "warn"];
  const lastLines: string[] = [];
  // Unknown until Ponder says which port its server took: the one asked for may be taken.
  let port: number | null = null;
  let portTaken = false;
  const onLine = (line: string) => {
    if (!line.trim()) return;
    const entry = jsonLine(line);
    port = serverPortOf(entry) ?? port;
    portTaken ||= endedOnATakenPort(entry);
    if (entry && typeof entry.level === "number" && entry.level < shownFrom) return;
    lastLines.push(line);
    if (lastLines.length > 20) lastLines.shift();
    options.onLog?.(line);
  };
  // Whole lines, each stream on its own: a line may arrive in two reads.
  for (const stream of [child.stdout, child.stderr]) {
    if (stream)
      createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY }).on("line", onLine);
  }
  const urlOf = () => `http://127.0.0.1:${port ?? options.port}`;
  // Once its pipes are closed too: its last lines (why it ended) may come after its exit.
  const closed = new Promise<void>((resolve) => child.once("close", () => resolve()));

  return {
    get url() {
      return urlOf();
    },
    process: child,
    async waitUntilReady(timeoutMs = 120_000) {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        if (child.exitCode !== null || child.signalCode !== null) {
          await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 1_000))]);
          const why = `Ponder exited before it was ready:\n${lastLines.join("\n")}`;
          throw portTaken ? new PonderPortTakenError(why) : new Error(why);
        }
        // Asked only once Ponder has said where it listens: on the port it was given, something
        // else (another Ponder, even) may answer.
        const ready =
          port !== null &&
          (await fetch(`${urlOf()}/ready`).then(
            (response) => response.status === 200,
            () => false,
          ));
        if (ready) return;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      throw new Error(`Ponder was not ready within ${timeoutMs} ms:\n${lastLines.join("\n")}`);
    },
    // Ponder releases its schema lock on SIGTERM; after a SIGKILL the next start waits ~25 s.
    stop: () => waitForExit(child, "SIGTERM", 20_000),
  };
}

/**
 * Ponder ended on a taken port: the next one after its own was taken too, or the port it had
 * checked was taken before it listened. It never served, and it released its schema on the way
 * out, so starting it again elsewhere on the same schema is safe (docs/traps.md#ponder).
 */
export class PonderPortTakenError extends Error {
  override name = "PonderPortTakenError";
}

/** Ponder's last line when its server's listen found the port taken: nothing else ends so. */
function endedOnATakenPort(entry: Record<string, unknown> | null): boolean {
  const error = entry?.error;
  return (
    (entry?.msg === "uncaughtException" || entry?.msg === "unhandledRejection") &&
    typeof error === "object" &&
    error !== null &&
    "code" in error &&
    error.code === "EADDRINUSE"
  );
}

/**
 * Ponder, ready, on a port `choosePort` picks, started again on another pick (at most `attempts`
 * times) when it ended on a taken port, as a port free a moment before can be by then
 * (docs/traps.md#ponder). Stopped when it does not get ready. `onStart` sees each Ponder as it
 * starts, for a caller that must be able to stop it while it is not ready yet (on ^C, say).
 */
export async function startReadyPonder(
  options: Omit<PonderOptions, "port">,
  choosePort: () => Promise<number>,
  { attempts = 3, onStart }: { attempts?: number; onStart?: (ponder: RunningPonder) => void } = {},
): Promise<RunningPonder> {
  for (let attempt = 1; ; attempt++) {
    const ponder = startPonder({ ...options, port: await choosePort() });
    onStart?.(ponder);
    try {
      await ponder.waitUntilReady();
      return ponder;
    } catch (error) {
      await ponder.stop();
      if (!(error instanceof PonderPortTakenError) || attempt >= attempts) throw error;
    }
  }
}

/** pino's levels, as Ponder writes them in its JSON lines. */
const LEVELS = { debug: 20, info: 30, warn: 40, error: 50 } as const;

function jsonLine(line: string): Record<string, unknown> | null {
  if (!line.startsWith("{")) return null;
  try {
    const entry: unknown = JSON.parse(line);
    return entry && typeof entry === "object" ? (entry as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * The port Ponder's server took, from its `Created HTTP server` line (info). Ponder does not fail
 * on a taken port: it logs `Port in use` and takes the next one (once: a second taken port ends
 * it). A port found free a moment before can be taken by then, by another process or as the
 * local end of an outgoing connection (docs/traps.md#ponder).
 */
function serverPortOf(entry: Record<string, unknown> | null): number | null {
  return entry?.msg === "Created HTTP server" && typeof entry.port === "number" ? entry.port : null;
}

/**
 * A schema per build: Ponder refuses a schema written by a different build, and a changed
 * indexer (its files, or what it indexes) must re-index from the start block anyway.
 * The same build restarted gets the same schema and resumes where it stopped.
 */
export async function indexerSchemaName(identity: {
  chainId: number;
  genesisHash: string;
  usdcAddress: string;
  payTo: string;
  payoutAddress: string;
  startBlock: number;
}): Promise<string> {
  const hash = createHash("sha256");
  hash.update(JSON.stringify(identity).toLowerCase());
  for (const file of await indexerFiles()) {
    hash.update(relative(repositoryRoot, file));
    hash.update(await readFile(file));
  }
  return `indexer_${hash.digest("hex").slice(0, 16)}`;
}

async function indexerFiles(): Promise<string[]> {
  const sourceFiles = (await readdir(join(repositoryRoot, "src"), { recursive: true }))
    .filter((file) => file.endsWith(".ts"))
    .map((file) => join(repositoryRoot, "src", file));
  return [
    "ponder.config.ts",
    "ponder.schema.ts",
    "api/config/indexerConfig.ts",
    "api/config/settings.ts",
    "contracts-abi/usdc.ts",
  ]
    .map((file) => join(repositoryRoot, file))
    .concat(sourceFiles)
    .sort();
}
