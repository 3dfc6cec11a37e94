/**
 * How the CLI speaks: one JSON document on stdout with --json, readable lines otherwise; a
 * failure is one line on stderr and a non-zero exit (cli/main.ts), never a stack trace.
 */

export interface OutputOptions {
  json?: boolean;
}

export interface Output {
  json: boolean;
  /** stdout is a terminal with a size (a live display is welcome). */
  terminal: boolean;
  /** A line for people; nothing in --json mode. */
  line(text?: string): void;
  /** Aligned `label  value` lines for people; nothing in --json mode. */
  fields(rows: [string, string | number | null | undefined][]): void;
  /** The command's result: the JSON document with --json. */
  result(value: unknown): void;
}

import { terminalSafe } from "./terminalText.ts";

export function createOutput(options: OutputOptions): Output {
  const json = options.json === true;
  // Whatever a service sent is cleaned as it is read (readJson); this is the last line of defence.
  const write = (text: string) => process.stdout.write(`${terminalSafe(text)}\n`);
  return {
    json,
    // A pseudo-terminal without a size (0 columns) cannot hold a live display: plain lines.
    terminal: process.stdout.isTTY === true && (process.stdout.columns ?? 0) > 0 && !json,
    line(text = "") {
      if (!json) write(text);
    },
    fields(rows) {
      if (json) return;
      const shown = rows.filter(([, value]) => value !== undefined && value !== null);
      const width = Math.max(0, ...shown.map(([label]) => label.length));
      for (const [label, value] of shown) write(`${label.padEnd(width)}  ${value}`);
    },
    result(value) {
      if (json) write(JSON.stringify(value, jsonBigints, 2));
    },
  };
}

function jsonBigints(_key: string, value: unknown): unknown {
  return typeof value === "bigint" ? value.toString() : value;
}
