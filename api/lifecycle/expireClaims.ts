import type { ServiceDeps } from "../serviceDeps.ts";
import { LOCK_KEYS } from "../workers/lockKeys.ts";
import type { Worker } from "../workers/runWorker.ts";
import { releaseExpiredReservations } from "./releaseReservations.ts";

/**
 * awaiting_payment → expired (the one writer of this transition) once the lifetime and a grace period have passed. The grace lets
 * a payment mined just before expiry reach its confirmations first; the matcher still pays a
 * claim from a transfer mined before `expires_at` even after the claim shows expired.
 */
export async function expireClaims(deps: Pick<ServiceDeps, "sql" | "config">): Promise<number> {
  const rows = await deps.sql`
    update app.claims set status = 'expired'
    where status = 'awaiting_payment'
      and expires_at < now() - make_interval(secs => ${deps.config.claims.expiryGraceSeconds})
    returning id`;
  return rows.length;
}

export function createExpiryWorker(deps: ServiceDeps): Worker {
  return {
    name: "expiry",
    lockKey: LOCK_KEYS.expiryWorker,
    intervalMs: deps.config.claims.expiryIntervalMs,
    tick: async () => {
      await expireClaims(deps);
      await releaseExpiredReservations(deps.sql);
      return false;
    },
  };
}
