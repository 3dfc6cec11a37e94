-- Inbound messages deleted by retention (MAIL_RETENTION_DAYS), counted by their status when
-- they were deleted. /metrics' pay_and_earn_mails_total adds them to the rows still kept, so the
-- counter never goes down when old rows are pruned (Prometheus reads a drop as a reset).
create table app.mail_messages_pruned (
  status text primary key,
  count bigint not null check (count >= 0)
);
