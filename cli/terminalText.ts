import { stripVTControlCharacters } from "node:util";

/**
 * Control characters other than the line feed: C0 (tab included: it can hide text), DEL, and C1
 * (U+0080–U+009F; U+009B is a one-character CSI on terminals that honour C1).
 */
const CONTROL = /(?!\n)\p{Cc}/gu;

/**
 * Text a service sent, made safe to print: whole escape sequences (colours, cursor moves, OSC
 * window titles and links) go first, then any control character left, so a hostile `--service`
 * cannot rewrite the screen, fake a line the CLI did not print, or set the terminal's title.
 * Line feeds stay (a receipt's message has several lines) unless `oneLine`.
 */
export function terminalSafe(text: string, options: { oneLine?: boolean } = {}): string {
  const clean = stripVTControlCharacters(text).replace(CONTROL, "");
  return options.oneLine ? clean.replace(/\n/g, " ") : clean;
}

/** Every string inside a parsed JSON answer, made safe to print. */
export function terminalSafeJson(value: unknown): unknown {
  if (typeof value === "string") return terminalSafe(value);
  if (Array.isArray(value)) return value.map(terminalSafeJson);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value).map(([key, inner]) => [terminalSafe(key), terminalSafeJson(inner)]),
    );
  }
  return value;
}
