-- When the matcher last found a block's eth_getLogs answer short of a transfer that the block's
-- receipts have (a provider that truncates without an error): health says so for an hour
-- (docs/operating.md#short-logs).
alter table app.matcher_cursor add column logs_short_at timestamptz;
