import { writeFileSync } from "node:fs";
import { CONFIGURATION_DOC_PATH, renderConfigurationDoc } from "./configurationDoc.ts";

/** `npm run docs:config`: writes docs/configuration.md from the settings' schemas. */
writeFileSync(
  new URL(`../../${CONFIGURATION_DOC_PATH}`, import.meta.url),
  renderConfigurationDoc(),
);
console.log(`wrote ${CONFIGURATION_DOC_PATH}`);
