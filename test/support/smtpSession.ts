import { connect, type Socket } from "node:net";

/**
 * A raw SMTP client for hostile sessions that no mail library would send: any bytes in DATA
 * (bare CR, NUL, a header block without a body), pipelined command floods, and each reply's
 * code as the server gave it. Replies are read in order; a closed connection answers every
 * pending and later read with code 0.
 */

export interface SmtpReply {
  code: number;
  text: string;
}

export interface SmtpSession {
  /** The next reply (the greeting first). */
  reply(): Promise<SmtpReply>;
  /** Writes one command line and reads its reply. */
  command(line: string): Promise<SmtpReply>;
  /** Writes lines at once (pipelining) and reads one reply per line. */
  pipeline(lines: string[]): Promise<SmtpReply[]>;
  /**
   * Writes the message after DATA's 354, dot-stuffed (unless `dotStuffing` is false: the bytes
   * as they are) and ended by CRLF.CRLF; reads the reply.
   */
  data(raw: Buffer, options?: { dotStuffing?: boolean }): Promise<SmtpReply>;
  closed(): boolean;
  close(): void;
}

const CLOSED: SmtpReply = { code: 0, text: "connection closed" };

export function smtpSession(
  port: number,
  options: { localAddress?: string; replyTimeoutMs?: number } = {},
): SmtpSession {
  const socket: Socket = connect({ host: "127.0.0.1", port, localAddress: options.localAddress });
  const replyTimeoutMs = options.replyTimeoutMs ?? 10_000;
  const ready: SmtpReply[] = [];
  const waiting: ((reply: SmtpReply) => void)[] = [];
  let pending = "";
  let lines: string[] = [];
  let isClosed = false;

  const deliver = (reply: SmtpReply) => {
    const waiter = waiting.shift();
    if (waiter) waiter(reply);
    else ready.push(reply);
  };
  socket.on("data", (chunk: Buffer) => {
    pending += chunk.toString("latin1");
    let end = pending.indexOf("\r\n");
    while (end >= 0) {
      const line = pending.slice(0, end);
      pending = pending.slice(end + 2);
      lines.push(line.slice(4));
      // "250-…" continues a reply, "250 …" ends it.
      if (/^\d{3}(?: |$)/.test(line)) {
        deliver({ code: Number(line.slice(0, 3)), text: lines.join("\n") });
        lines = [];
      }
      end = pending.indexOf("\r\n");
    }
  });
  socket.on("error", () => {});
  socket.on("close", () => {
    isClosed = true;
    for (const waiter of waiting.splice(0)) waiter(CLOSED);
  });

  const reply = () => {
    const next = ready.shift();
    if (next) return Promise.resolve(next);
    if (isClosed) return Promise.resolve(CLOSED);
    return new Promise<SmtpReply>((resolve, reject) => {
      const timer = setTimeout(() => {
        const index = waiting.indexOf(take);
        if (index >= 0) waiting.splice(index, 1);
        reject(new Error(`no SMTP reply within ${replyTimeoutMs} ms`));
      }, replyTimeoutMs);
      const take = (value: SmtpReply) => {
        clearTimeout(timer);
        resolve(value);
      };
      waiting.push(take);
    });
  };
  const write = (bytes: string | Buffer) => {
    if (!isClosed) socket.write(bytes);
  };

  const command = (line: string) => {
    write(`${line}\r\n`);
    return reply();
  };

  return {
    reply,
    command,
    async pipeline(commands) {
      write(commands.map((line) => `${line}\r\n`).join(""));
      const replies: SmtpReply[] = [];
      for (const _ of commands) replies.push(await reply());
      return replies;
    },
    async data(raw, { dotStuffing = true } = {}) {
      const go = await command("DATA");
      if (go.code !== 354) return go;
      // A line that starts with "." gets another (RFC 5321 §4.5.2), after any line break.
      const stuffed = dotStuffing
        ? Buffer.from(raw.toString("latin1").replace(/(^|\n)\./g, "$1.."), "latin1")
        : raw;
      const ending = /\r\n$/.test(stuffed.toString("latin1")) ? ".\r\n" : "\r\n.\r\n";
      write(Buffer.concat([stuffed, Buffer.from(ending)]));
      return reply();
    },
    closed: () => isClosed,
    close: () => socket.destroy(),
  };
}
