import type { z } from "zod";
import { indexerSettings } from "../../api/config/indexerConfig.ts";
import { mailSettings } from "../../api/config/mailSettings.ts";
import { serviceSettings } from "../../api/config/serviceConfig.ts";
import { chainSettings } from "../../api/config/settings.ts";
import { launcherSettings } from "../devnet/launcherConfig.ts";

/**
 * docs/configuration.md, written from the settings' zod schemas (`npm run docs:config`): each
 * setting's default from its schema, its meaning from its `.describe()`. A unit test holds the
 * committed file to what this writes, so the page cannot drift from the code.
 */

type Settings = Record<string, z.ZodType>;

interface Section {
  title: string;
  about: string;
  settings: Settings;
}

export const CONFIGURATION_DOC_PATH = "docs/configuration.md";

const SECTIONS: Section[] = [
  {
    title: "The chain and the database",
    about: "Read by the service, the indexer and `npm start`.",
    settings: chainSettings,
  },
  {
    title: "The service",
    about:
      "Read by `node api/main.ts` (`api/config/serviceConfig.ts`). What the limits, pools and thresholds protect is in [Operating](operating.md).",
    settings: serviceSettings,
  },
  {
    title: "Mail",
    about:
      "Part of the service's settings (`api/config/mailSettings.ts`); how the flow works is in [Surfaces](surfaces.md#mail).",
    settings: mailSettings,
  },
  {
    title: "The indexer",
    about: "Read by Ponder's configuration (`api/config/indexerConfig.ts`, `ponder.config.ts`).",
    settings: indexerSettings,
  },
  {
    title: "`npm start`",
    about:
      "The launcher's own (`scripts/devnet/launcherConfig.ts`); it also reads `RPC_URL`, `DATABASE_URL`, `PORT` and `START_BLOCK` above.",
    settings: launcherSettings,
  },
];

const HEADER = `# Configuration

<!-- Written by \`npm run docs:config\` from the settings' zod schemas; edit the schemas' \`.describe()\`, not this file. -->

Every setting comes from the environment (and \`.env\`, if present), is parsed once at start by
the zod schemas of its process (the service's and the indexer's in \`api/config/\`, \`npm start\`'s
in \`scripts/devnet/launcherConfig.ts\`), and a broken one stops start-up with one line per problem
(\`PAY_TO is not an address\`) and exit code 1. With none of them set, \`npm start\` runs a complete
local devnet and supplies the chain, the keys and the database itself. [\`.env.example\`](../.env.example)
lists them all to copy.

A setting shared by several processes is listed once, in the first section that reads it.
`;

/** What an unset setting becomes, as the schema says it. */
export function describeDefault(schema: z.ZodType): string {
  const def = schema.def as { type: string; defaultValue?: unknown };
  if (def.type === "default") {
    const value = def.defaultValue;
    return value === "" ? "none" : `\`${String(value)}\``;
  }
  if (def.type === "optional") return "unset";
  return "required";
}

function cell(text: string): string {
  return text.replaceAll("|", "\\|").replaceAll("\n", " ");
}

/** One section's table; settings already listed in an earlier section are left out. */
export function renderSettingsTable(settings: Settings, listed: Set<string>): string {
  const rows: string[] = [];
  for (const [name, schema] of Object.entries(settings)) {
    if (listed.has(name)) continue;
    listed.add(name);
    const meaning = schema.description;
    if (!meaning) {
      throw new Error(`${name} has no description: add .describe("…") beside its schema`);
    }
    rows.push(`| \`${name}\` | ${cell(describeDefault(schema))} | ${cell(meaning)} |`);
  }
  return ["| Setting | Default | Meaning |", "| --- | --- | --- |", ...rows].join("\n");
}

export function renderConfigurationDoc(): string {
  const listed = new Set<string>();
  const sections = SECTIONS.map(
    (section) =>
      `## ${section.title}\n\n${section.about}\n\n${renderSettingsTable(section.settings, listed)}\n`,
  );
  return [HEADER, ...sections].join("\n");
}
