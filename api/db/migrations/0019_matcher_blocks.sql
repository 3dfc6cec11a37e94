-- The blocks the matcher has decided transfers in, with the hash it saw each one under. When a
-- reorg deeper than CONFIRMATIONS takes the cursor's block, the matcher walks these down to the
-- highest one the chain still has (the chains split above it: a block's hash commits to its
-- parent) and reads everything after it again. Kept for a window of blocks behind the cursor
-- (api/matcher/matcherBlocks.ts).
create table app.matcher_blocks (
  block_number bigint primary key,
  block_hash text not null check (block_hash ~ '^0x[0-9a-f]{64}$')
);

-- The history there is: the blocks of the payments on record, and the cursor's own.
insert into app.matcher_blocks (block_number, block_hash)
select distinct on (block_number) block_number, block_hash
from app.payments where block_hash ~ '^0x[0-9a-f]{64}$'
order by block_number, verified_at desc nulls last
on conflict do nothing;
insert into app.matcher_blocks (block_number, block_hash)
select block_number, block_hash from app.matcher_cursor
where block_hash ~ '^0x[0-9a-f]{64}$' and block_number >= 0
on conflict (block_number) do update set block_hash = excluded.block_hash;
