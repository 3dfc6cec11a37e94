-- A2A tasks are bounded (api/a2a/taskStore.ts): each row names the client that created it, so
-- the tasks one client holds while they wait for an x402 payment (no claim yet) can be counted
-- against A2A_OPEN_TASKS_PER_CLIENT, and rows not changed for A2A_TASK_TTL_SECONDS are deleted.
alter table app.a2a_tasks add column client text;
create index a2a_tasks_waiting_by_client on app.a2a_tasks (client) where claim_id is null;
create index a2a_tasks_by_age on app.a2a_tasks (updated_at);
