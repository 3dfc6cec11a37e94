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
  webhookSender: 7_242_108,
  ledgerCount: 7_242_109,
  attentionCheck: 7_242_110,
  rowCounts: 7_242_111,
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
  /**
   * A transaction lock: turning events into deliveries, an A2A config catching up with its
   * claim's events, redelivering, deleting endpoints and old events hold it alone; registering
   * a claim's webhook and writing delivery results share it. So a registration sees every event
   * fanned out before it and the fan-out every registration committed before it
   * (api/webhooks/webhookEndpoints.ts), and whatever puts a delivery back in a line sees every
   * change of that line committed (sharing would not: each sharer relines from its own
   * snapshot, api/webhooks/deliveryLines.ts). Whoever writes endpoints takes it before its
   * first write: results hold it while they lock deliveries, then endpoints (failing_since), so
   * taking it after an endpoint's row would deadlock with them.
   */
  eventFanOut: 7_242_205,
  /**
   * With a second key (a hash of the task id): a transaction lock around counting an A2A task's
   * push notification configs and storing one (api/webhooks/webhookEndpoints.ts).
   */
  a2aPushConfigs: 7_242_206,
} as const;
