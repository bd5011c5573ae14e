-- +goose Up
-- A take batch updates every row of a page at once, before any old version can be pruned. At 70 % a
-- full page had room for the new versions of fewer than half its rows: a quarter of the takes in a
-- burst went to another page, with an entry in every index. Half a page holds a new version of each row.
ALTER TABLE webhook_deliveries SET (fillfactor = 50);

-- +goose Down
ALTER TABLE webhook_deliveries SET (fillfactor = 70);
