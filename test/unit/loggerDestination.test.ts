import { execFile, spawn } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

/**
 * The service's own log lines go to stdout through a buffered, asynchronous destination
 * (api/logger.ts). Nothing may be lost on a normal exit, and a quiet service's lines must not
 * wait for the buffer to fill. Checked in a process of its own, reading its real stdout.
 */

const logger = join(import.meta.dirname, "..", "..", "api", "logger.ts");

function script(body: string): string[] {
  return [
    "--input-type=module",
    "-e",
    `import { createLogger } from ${JSON.stringify(logger)};\nconst logger = createLogger("info", "t");\n${body}`,
  ];
}

function linesOf(stdout: string): { msg: string; n?: number }[] {
  return stdout
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line));
}

describe("the stdout destination", () => {
  it("writes every line before process.exit, as the SIGTERM path of api/main.ts exits", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      script(
        "for (let n = 0; n < 500; n++) logger.info({ n }, 'request');\nlogger.info('stopping');\nprocess.exit(0);",
      ),
    );
    const lines = linesOf(stdout);
    expect(lines).toHaveLength(501);
    expect(lines.map((line) => line.n).slice(0, 500)).toEqual([...Array(500).keys()]);
    expect(lines.at(-1)?.msg).toBe("stopping");
  });

  it("writes a lone line within about a second on a quiet process, long before it ends", async () => {
    const child = spawn(
      process.execPath,
      script("logger.info('started');\nsetTimeout(() => {}, 60_000);"),
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    try {
      const firstLine = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error("no line within 5 s")), 5_000);
        child.stdout.once("data", (chunk: Buffer) => {
          clearTimeout(timer);
          resolve(chunk.toString("utf8"));
        });
      });
      expect(linesOf(firstLine)[0]?.msg).toBe("started");
    } finally {
      child.kill("SIGKILL");
    }
  });
});
