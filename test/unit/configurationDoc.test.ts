import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import {
  CONFIGURATION_DOC_PATH,
  describeDefault,
  renderConfigurationDoc,
  renderSettingsTable,
} from "../../scripts/docs/configurationDoc.ts";

/** docs/configuration.md is written from the settings' schemas and must not drift from them. */
describe("docs/configuration.md", () => {
  it("is what `npm run docs:config` writes from the settings' schemas", () => {
    const committed = readFileSync(
      new URL(`../../${CONFIGURATION_DOC_PATH}`, import.meta.url),
      "utf8",
    );
    expect(
      committed,
      `${CONFIGURATION_DOC_PATH} differs from the settings' schemas: run \`npm run docs:config\``,
    ).toBe(renderConfigurationDoc());
  });

  it("lists every setting the service reads, with its default", () => {
    const page = renderConfigurationDoc();
    expect(page).toContain("| `PAYOUT_CONFIRMATIONS` | `30` |");
    expect(page).toContain("| `MAIL_INTAKE` | `off` |");
    expect(page).toContain("| `PUBLIC_URL` | unset |");
    expect(page).toContain("| `INDEXER_WS_URL` | unset |");
    expect(page).toContain("| `BLOCK_TIME` | `2` |");
    // Listed once, in the first section that reads it.
    expect(page.match(/\| `RPC_URL` \|/g)).toHaveLength(1);
  });

  it("refuses a setting without a description, naming it", () => {
    expect(() => renderSettingsTable({ NEW_SETTING: z.string().default("x") }, new Set())).toThrow(
      'NEW_SETTING has no description: add .describe("…") beside its schema',
    );
  });

  it("shows what an unset setting becomes", () => {
    expect(describeDefault(z.string().default(""))).toBe("none");
    expect(describeDefault(z.coerce.number().default(5))).toBe("`5`");
    expect(describeDefault(z.string().optional())).toBe("unset");
    expect(describeDefault(z.string())).toBe("required");
  });
});
