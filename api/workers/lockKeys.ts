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
  x402SettlementWatcher: 7_242_105,
  mailProcessor: 7_242_106,
  mailSender: 7_242_107,
  ledgerCount: 7_242_108,
  matching: 7_242_201,
  /** With a second key (a hash of the payout address or client): one claim creation at a time each. */
  claimCreation: 7_242_202,
  /**
   * A transaction lock: one batch of claim creations at a time (app.create_claims), whichever
   * replica; two batches, each holding amounts it reserved, could otherwise wait for each other.
   */
  claimBatches: 7_242_203,
  /**
   * With a second key (a hash of the client): a transaction lock around counting a client's A2A
   * tasks that wait for a payment and storing a new one (api/agentTasks/taskRecords.ts).
   */
  a2aWaitingTasks: 7_242_204,
} as const;
