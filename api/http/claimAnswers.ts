import { isDeepStrictEqual } from "node:util";
import { claimView } from "../claims/claimView.ts";
import type { ClaimDetails } from "../claims/readClaim.ts";
import type { ServiceConfig } from "../config/serviceConfig.ts";
import { type PrebuiltAnswer, prebuildAnswer } from "../web/prebuiltAnswer.ts";

/** Claims whose last answer is kept; past it, the longest kept is forgotten first. */
const MOST_KEPT = 10_000;

/**
 * GET /api/claims/{id}'s answer for a claim as just read: the view, serialised and encoded, kept
 * per claim id and given again while the claim reads the same as when it was built (every field
 * compared, so a field added to ClaimDetails is compared too). The claim is still read from the
 * database for every request: only the work of turning the same claim into the same bytes is saved,
 * which was a third of what the route cost (BENCHMARKS.md#http-routes); a claim that changed gets
 * a new answer at once. The view depends on the claim and the configuration only.
 */
export function claimAnswers(config: ServiceConfig): (claim: ClaimDetails) => PrebuiltAnswer {
  const kept = new Map<string, { claim: ClaimDetails; answer: PrebuiltAnswer }>();
  return (claim) => {
    const last = kept.get(claim.id);
    if (last && isDeepStrictEqual(last.claim, claim)) return last.answer;
    const answer = prebuildAnswer({
      body: JSON.stringify(claimView(config, claim)),
      contentType: "application/json; charset=utf-8",
      cacheControl: "no-store",
    });
    if (last) kept.delete(claim.id);
    else if (kept.size >= MOST_KEPT) kept.delete(kept.keys().next().value as string);
    kept.set(claim.id, { claim, answer });
    return answer;
  };
}
