-- A2A tasks (api/a2a), so that GetTask, ListTasks and CancelTask work on any replica and after
-- a restart. A task is the A2A protocol's record of a conversation; the money is in the claim
-- it names (claim_id), whose state the task follows when it is read. The task itself is kept
-- as the SDK's JSON (`Task.toJSON`), the columns are what lookups need.
create table app.a2a_tasks (
  id text primary key,
  context_id text not null,
  claim_id text references app.claims (id),
  state text not null,
  task jsonb not null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
-- ListTasks lists within a context, newest first.
create index a2a_tasks_by_context on app.a2a_tasks (context_id, updated_at desc, id);
