/**
 * Advisory lock keys, one per exclusive job, in one place so no two collide.
 * Worker keys are session locks held by the running worker; MATCHING is a transaction lock
 * that serialises the matcher's batches with attaching a tx hash to a claim.
 */
export const LOCK_KEYS = {
  matcherWorker: 7_242_101,
  expiryWorker: 7_242_102,
  payoutSender: 7_242_103,
  payoutConfirmer: 7_242_104,
  matching: 7_242_201,
} as const;
