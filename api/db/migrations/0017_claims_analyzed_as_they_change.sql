-- Autovacuum analyzes the claims and their amounts after a fixed number of changed rows, not
-- after a tenth of the table. The claim creation functions run on generic plans (0014), made on
-- the statistics of the moment: on statistics from when few claims were open, the reuse lookup
-- (app.claim_to_reuse) may walk claims_by_status through every open claim for each claim
-- created. By default a table of a million claims is analyzed again only after 100,000 changes;
-- with these settings after about 11,000 (1,000 plus a hundredth), at most once a minute
-- (autovacuum's naptime). The creation gatherer analyzes them itself in a process's first
-- creations (api/claims/openClaims.ts), before autovacuum's first visit.
alter table app.claims
  set (autovacuum_analyze_scale_factor = 0.01, autovacuum_analyze_threshold = 1000);
alter table app.amount_reservations
  set (autovacuum_analyze_scale_factor = 0.01, autovacuum_analyze_threshold = 1000);
