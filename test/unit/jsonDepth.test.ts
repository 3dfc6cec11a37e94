import { describe, expect, it } from "vitest";
import { MAX_JSON_DEPTH, refuseDeepJson } from "../../api/web/middleware/jsonDepth.ts";

const check = (text: string) => () =>
  refuseDeepJson(undefined as never, undefined as never, Buffer.from(text, "utf8"), "utf-8");
const nested = (depth: number, open = "[", close = "]") =>
  `${open.repeat(depth)}${close.repeat(depth)}`;

describe("refuseDeepJson (express.json's verify)", () => {
  it("lets JSON through up to MAX_JSON_DEPTH levels, objects and arrays alike", () => {
    expect(check(nested(MAX_JSON_DEPTH))).not.toThrow();
    expect(check(`${'{"a":'.repeat(MAX_JSON_DEPTH)}1${"}".repeat(MAX_JSON_DEPTH)}`)).not.toThrow();
    // Depth is nesting, not the number of brackets: siblings do not add up.
    expect(check(`[${Array.from({ length: 500 }, () => "[[]]").join(",")}]`)).not.toThrow();
  });

  it("refuses one level more, as a 400 of its own type", () => {
    expect(check(nested(MAX_JSON_DEPTH + 1))).toThrow(
      expect.objectContaining({ status: 400, type: "entity.too.deep" }),
    );
    expect(check(nested(7_000))).toThrow(/nested deeper/);
  });

  it("does not count brackets inside strings, escaped quotes included", () => {
    const inString = JSON.stringify({ text: `${nested(200)} \\" [[[ "` });
    expect(check(inString)).not.toThrow();
    const afterEscapes = `["\\\\", ${nested(MAX_JSON_DEPTH + 1)}]`;
    expect(check(afterEscapes)).toThrow(/nested deeper/);
  });
});
