import { builder } from "./builder.ts";
import "./offerType.ts";
import "./claimType.ts";
import "./ledgerType.ts";
import "./statsType.ts";

/** The whole schema: each imported file registers its types and root fields on `builder`. */
export const graphqlSchema = builder.toSchema({ sortSchema: false });
