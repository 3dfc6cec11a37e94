import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { linesPerTurn } from "../../api/logLines.ts";

/** Log lines are written once per turn of the event loop, in order, and never lost on exit. */

describe("linesPerTurn", () => {
  it("writes the lines of one turn together, in order, once the turn ends", async () => {
    const writes: string[] = [];
    const lines = linesPerTurn({ write: (text: string) => writes.push(text) });
    for (let n = 0; n < 100; n++) lines.write(`${n}\n`);
    expect(writes).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(writes).toEqual([Array.from({ length: 100 }, (_, n) => `${n}\n`).join("")]);

    lines.write("quiet\n");
    await new Promise((resolve) => setImmediate(resolve));
    expect(writes).toEqual([expect.any(String), "quiet\n"]);

    lines.write("flushed\n");
    await new Promise<void>((resolve) => lines.flush(resolve));
    expect(writes.at(-1)).toBe("flushed\n");
  });
});

const logger = join(import.meta.dirname, "..", "..", "api", "logger.ts");

/** A process of its own that logs through the service's stdout destination, then `ending`. */
async function stdoutOf(ending: string): Promise<{ n?: number; msg: string }[]> {
  const source = `import { createLogger } from ${JSON.stringify(logger)};
const logger = createLogger("info", "t");
for (let n = 0; n < 500; n++) logger.info({ n }, "request");
${ending}`;
  const { stdout } = await promisify(execFile)(process.execPath, [
    "--input-type=module",
    "-e",
    source,
  ]).catch((error: { stdout: string }) => error);
  return stdout
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line));
}

describe("the service's stdout", () => {
  it.each([
    ["process.exit, as the SIGTERM path of api/main.ts ends", "process.exit(0);"],
    ["an uncaught exception", "throw new Error('boom');"],
    ["the end of the event loop", ""],
  ])("gets every line before %s", async (_, ending) => {
    const lines = await stdoutOf(ending);
    expect(lines.map((line) => line.n)).toEqual([...Array(500).keys()]);
  });
});
