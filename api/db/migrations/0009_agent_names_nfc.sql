-- Agent names are normalised to NFC on the way in (api/schemas/inputs.ts, agentNameInput), and
-- the ledger filters by exact name: names stored before that are brought to NFC too, so one
-- name typed in either form finds every claim it was given on. normalize() needs a UTF8
-- database; under any other encoding there is nothing it could change, so it is skipped.
do $$
begin
  if current_setting('server_encoding') = 'UTF8' then
    update app.claims set agent_name = normalize(agent_name, NFC)
    where agent_name is not null and agent_name is not nfc normalized;
  end if;
end
$$;
