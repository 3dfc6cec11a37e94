-- The claim creation functions never scan a table: every statement of theirs finds its rows by
-- an index on equality (a claim's id, its payout address, its client, an amount), and a scan
-- is only ever the planner's mistake about the table's size.
--
-- The functions run on generic plans (0014), made once per session and kept until the table's
-- statistics change. 0015 kept a plan made with no statistics from being a scan; a plan made
-- right after autovacuum analyzed a table of a few claims still could be one: a sequential
-- scan of one page is cheaper than an index lookup, and the plan stays a scan while the table
-- grows to thousands of claims, until autovacuum's next analyze (test/integration/
-- claimCreations.test.ts creates crowded batches on such a table). With sequential scans off for
-- these three functions, the planner takes the index wherever there is one; nothing else in the
-- database is affected.
alter function app.create_claims(jsonb, integer, numeric, bigint)
  set enable_seqscan = off;
alter function app.create_claim(text, text, text, text, text, text, bigint, integer, integer,
  numeric, timestamptz, timestamptz, numeric[])
  set enable_seqscan = off;
alter function app.take_claim_amount(text, numeric[], timestamptz)
  set enable_seqscan = off;
