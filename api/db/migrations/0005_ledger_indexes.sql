-- The public ledger reads completed claims newest first in keyset pages of
-- (completed_at, id), optionally for one agent name. Ties in completed_at go by id in byte
-- order (collate "C"), the same whatever the server's locale. Only completed claims are listed.
create index claims_ledger_order on app.claims (completed_at desc, id collate "C" desc)
  where status = 'completed';
create index claims_ledger_by_agent
  on app.claims (agent_name, completed_at desc, id collate "C" desc)
  where status = 'completed' and agent_name is not null;
