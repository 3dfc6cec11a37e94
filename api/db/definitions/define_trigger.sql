-- Creates (or replaces) a trigger only when its definition is new or changed, known by the md5 of
-- its text kept as the trigger's comment. `create or replace trigger` takes SHARE ROW EXCLUSIVE on
-- its table, which waits for every transaction writing the table and holds up every write after
-- it: applying a definitions file again because a function body in it changed must not lock the
-- tables its triggers are on (replacing a function locks no table). Reading pg_trigger locks
-- nothing.
create or replace function app.define_trigger(
  on_table regclass, trigger_name name, definition text
) returns void language plpgsql as $$
begin
  if exists (select 1 from pg_trigger t
      where t.tgrelid = on_table and t.tgname = trigger_name
        and obj_description(t.oid, 'pg_trigger') = md5(definition)) then
    return;
  end if;
  execute definition;
  execute format('comment on trigger %I on %s is %L', trigger_name, on_table, md5(definition));
end $$;
