-- Wake the sender in whichever process runs it, whoever queues a mail (completing a claim
-- queues its receipt mail): delivered on commit.
create or replace function app.wake_mail_sender() returns trigger language plpgsql as $$
begin
  perform pg_notify('pay_and_earn_outbox', '');
  return null;
end $$;

-- Made through app.define_trigger (define_trigger.sql): an unchanged trigger is left alone, so
-- applying this file again takes no lock on the outbox.
select app.define_trigger('app.outbox', 'outbox_wakes_sender', $trigger$
  create or replace trigger outbox_wakes_sender after insert on app.outbox
    for each statement execute function app.wake_mail_sender()$trigger$);

