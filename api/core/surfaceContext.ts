import type { ServiceDeps } from "../serviceDeps.ts";
import type { Core } from "./createCore.ts";

/**
 * What a surface is built from: the use-cases, and the infrastructure its own protocol needs
 * (the HTTP app's rate limiter and metrics read the database; nothing of the domain does
 * through here: that is `core`'s).
 */
export interface SurfaceContext extends ServiceDeps {
  core: Core;
}
