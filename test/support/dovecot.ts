import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, chown, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { ImapFlow } from "imapflow";
import { inject } from "vitest";
import { waitForExit } from "../../scripts/devnet/processes.ts";
import { recordProcess } from "../../scripts/devnet/processRecords.ts";
import { freePort } from "./ports.ts";
import { waitFor } from "./waitFor.ts";

/**
 * A throwaway IMAP server for a test file: Debian's dovecot-imapd, run in the foreground from a
 * config of its own in a temporary folder, with one mailbox user. See STACK.md "Mail servers
 * for tests" (as root, mail must be owned by the `mail` user). No npm package ships a real IMAP
 * server that runs here (WildDuck needs MongoDB), so the integration tests' global setup
 * installs Dovecot with apt when it is missing and it can (ensureDovecot).
 */

const DOVECOT_PACKAGE = "dovecot-imapd";

/**
 * The dovecot binary: DOVECOT_PATH when set (used as it is, found or not), otherwise
 * /usr/sbin/dovecot or `dovecot` on PATH; undefined when there is none.
 */
export function dovecotBinary(env: Record<string, string | undefined> = process.env) {
  if (env.DOVECOT_PATH) return existsSync(env.DOVECOT_PATH) ? env.DOVECOT_PATH : undefined;
  // /usr/sbin is not on every user's PATH.
  for (const folder of ["/usr/sbin", ...(env.PATH ?? "").split(":").filter(Boolean)]) {
    if (existsSync(join(folder, "dovecot"))) return join(folder, "dovecot");
  }
  return undefined;
}

/** What to do when Dovecot is missing, in words a newcomer can act on. */
export function missingDovecotMessage(env: Record<string, string | undefined> = process.env) {
  return env.DOVECOT_PATH
    ? `Dovecot is missing at ${env.DOVECOT_PATH} (DOVECOT_PATH): the IMAP tests need a real IMAP ` +
        "server. Unset DOVECOT_PATH or point it at a dovecot binary."
    : `Dovecot is missing: the IMAP tests need a real IMAP server. As root with Debian's ` +
        `packages reachable, the tests install it themselves; otherwise run \`sudo apt-get ` +
        `update && sudo apt-get install -y ${DOVECOT_PACKAGE}\`, or set DOVECOT_PATH.`;
}

/**
 * Installs dovecot-imapd with apt when it is missing, DOVECOT_PATH is unset, and this process
 * is root on a machine with apt-get. Never throws: a test that needs Dovecot fails with
 * missingDovecotMessage() if it is still missing. Returns what it did, for the run's log.
 */
export async function ensureDovecot(
  env: Record<string, string | undefined> = process.env,
  run: (command: string, args: string[]) => Promise<number> = runQuietly,
): Promise<"present" | "installed" | "missing"> {
  if (dovecotBinary(env)) return "present";
  if (env.DOVECOT_PATH || userInfo().uid !== 0 || !existsSync("/usr/bin/apt-get")) return "missing";
  const aptEnv = ["-o", "DPkg::Lock::Timeout=300", "-qq"];
  const updated = await run("apt-get", [...aptEnv, "update"]);
  const installed =
    updated === 0 && (await run("apt-get", [...aptEnv, "install", "-y", DOVECOT_PACKAGE]));
  return installed === 0 && dovecotBinary(env) ? "installed" : "missing";
}

/**
 * Where the run's global setup says how its Dovecot install went, while it goes on beside the
 * tests (apt took 15-30 s, and only the IMAP tests need it): "installing", then the outcome.
 */
export const DOVECOT_INSTALL_STATUS = join(
  import.meta.dirname,
  "..",
  "..",
  "node_modules",
  ".cache",
  "pay-and-earn",
  "dovecot-install",
);

/**
 * The binary, once the run's install (if one is under way) has finished; undefined when there
 * is still none. A status file older than this run's own is never waited on: an install whose
 * run was killed said "installing" for ever.
 */
async function installedDovecot(timeoutMs = 300_000): Promise<string | undefined> {
  const deadline = Date.now() + timeoutMs;
  while (!dovecotBinary()) {
    const status = await readFile(DOVECOT_INSTALL_STATUS, "utf8").catch(() => "");
    const [state, startedBy] = status.split(" ");
    if (state !== "installing" || startedBy !== inject("dovecotInstallId")) return undefined;
    if (Date.now() > deadline) return undefined;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return dovecotBinary();
}

function runQuietly(command: string, args: string[]): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      stdio: "ignore",
      env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
    });
    child.once("error", () => resolve(-1));
    child.once("exit", (code) => resolve(code ?? -1));
  });
}

export interface TestImapServer {
  port: number;
  user: string;
  password: string;
  /** imap://user:password@127.0.0.1:port/INBOX, for IMAP_URL. */
  url: string;
  /** Puts a message in the INBOX, unseen, as a mail server's delivery would. */
  deliver(raw: string | Buffer): Promise<void>;
  /** The flags of the INBOX's messages, by Message-ID. */
  flagsByMessageId(): Promise<Map<string, string[]>>;
  stop(): Promise<void>;
}

const USER = "earn";
const PASSWORD = "test-password";

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

export async function startTestImapServer(): Promise<TestImapServer> {
  const binary = await installedDovecot();
  if (!binary) throw new Error(missingDovecotMessage());
  const directory = await mkdtemp(join(tmpdir(), "dovecot-"));
  await chmod(directory, 0o755);
  const mail = join(directory, "mail");
  await mkdir(mail);
  const asRoot = userInfo().uid === 0;
  if (asRoot) await chown(mail, 8, 8); // the `mail` user: dovecot refuses uid 0 for mail access
  const port = await freePort();
  const config = join(directory, "dovecot.conf");
  await writeFile(
    config,
    [
      "protocols = imap",
      "listen = 127.0.0.1",
      `base_dir = ${join(directory, "run")}`,
      `state_dir = ${join(directory, "state")}`,
      `log_path = ${join(directory, "dovecot.log")}`,
      "ssl = no",
      "disable_plaintext_auth = no",
      `mail_location = maildir:${mail}/%u`,
      ...(asRoot
        ? ["first_valid_uid = 8", "first_valid_gid = 8", "default_internal_user = root"]
        : []),
      `passdb {\n  driver = static\n  args = password=${PASSWORD}\n}`,
      `userdb {\n  driver = static\n  args = ${asRoot ? "uid=mail gid=mail " : ""}home=${mail}/%u\n}`,
      `service imap-login {\n  inet_listener imap {\n    port = ${port}\n  }\n}`,
      "",
    ].join("\n"),
  );
  const child: ChildProcess = spawn(binary, ["-F", "-c", config], { stdio: "ignore" });
  recordProcess(child, "dovecot");
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.once("error", () => {});
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`dovecot exited (${child.exitCode})`);
      return accepts(port);
    },
    { timeoutMs: 15_000, what: "dovecot to listen" },
  );

  const client = async () => {
    const imap = new ImapFlow({
      host: "127.0.0.1",
      port,
      secure: false,
      auth: { user: USER, pass: PASSWORD },
      logger: false,
    });
    await imap.connect();
    return imap;
  };

  return {
    port,
    user: USER,
    password: PASSWORD,
    url: `imap://${USER}:${PASSWORD}@127.0.0.1:${port}/INBOX`,
    async deliver(raw) {
      const imap = await client();
      try {
        await imap.append("INBOX", raw);
      } finally {
        await imap.logout();
      }
    },
    async flagsByMessageId() {
      const imap = await client();
      const flags = new Map<string, string[]>();
      try {
        await imap.mailboxOpen("INBOX");
        for await (const message of imap.fetch("1:*", { envelope: true, flags: true })) {
          flags.set(message.envelope?.messageId ?? "", [...(message.flags ?? [])]);
        }
      } finally {
        await imap.logout();
      }
      return flags;
    },
    async stop() {
      if (child.exitCode === null) await waitForExit(child, "SIGTERM");
      await exited;
      await rm(directory, { recursive: true, force: true });
    },
  };
}
