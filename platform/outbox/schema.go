package outbox

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"sync/atomic"

	wmsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
)

// The outbox is one table, created by migrations/platform/00003_outbox.sql. Writer and forwarder
// must agree on its name, so both take it from here.
const (
	// Topic is the watermill topic of the outbox (the forwarders' topic).
	Topic = "outbox"
	// Table is the table watermill-sql reads and writes for Topic.
	Table = "outbox_messages"
)

func outboxTableName(string) string { return `"` + Table + `"` }

// outboxSchema is watermill-sql's queue schema over the outbox table, read with
// FOR UPDATE SKIP LOCKED under READ COMMITTED: forwarders (in one process or in several replicas)
// take disjoint rows instead of queueing on one another's locks, and never fail with
// serialization errors halfway through a batch (which watermill-sql does not notice: it would
// forward the rows read so far, then fail to delete them).
type outboxSchema struct {
	wmsql.PostgreSQLQueueSchema
	read *atomic.Int64 // rows the current (or last) poll of its forwarder read; nil for the writer
}

func newOutboxSchema(batchSize int, read *atomic.Int64) outboxSchema {
	return outboxSchema{wmsql.PostgreSQLQueueSchema{GenerateMessagesTableName: outboxTableName, SubscribeBatchSize: batchSize}, read}
}

func (s outboxSchema) SelectQuery(params wmsql.SelectQueryParams) (wmsql.Query, error) {
	q, err := s.PostgreSQLQueueSchema.SelectQuery(params)
	if err != nil {
		return q, err
	}
	q.Query += " SKIP LOCKED"
	if s.read != nil {
		s.read.Store(0) // a poll begins
	}
	return q, nil
}

func (s outboxSchema) UnmarshalMessage(params wmsql.UnmarshalMessageParams) (wmsql.Row, error) {
	row, err := s.PostgreSQLQueueSchema.UnmarshalMessage(params)
	if err == nil && s.read != nil {
		s.read.Add(1)
	}
	return row, err
}

func (s outboxSchema) SubscribeIsolationLevel() sql.IsolationLevel { return sql.LevelReadCommitted }

// InsertQuery writes the messages of one publish with one statement whose text is the same for any
// number of them (three arrays, not a VALUES list that grows with the fan-out): PostgreSQL plans it
// once per connection, and a fan-out of N costs one statement whatever N.
func (s outboxSchema) InsertQuery(params wmsql.InsertQueryParams) (wmsql.Query, error) {
	n := len(params.Msgs)
	uuids, payloads, metadata := make([]string, n), make([]string, n), make([]string, n)
	for i, msg := range params.Msgs {
		meta, err := json.Marshal(msg.Metadata)
		if err != nil {
			return wmsql.Query{}, fmt.Errorf("metadata of message %s: %w", msg.UUID, err)
		}
		uuids[i], payloads[i], metadata[i] = msg.UUID, string(msg.Payload), string(meta)
	}
	return wmsql.Query{
		Query: `INSERT INTO ` + s.MessagesTable(params.Topic) + ` (uuid, payload, metadata)
			SELECT * FROM unnest(CAST($1 AS text[]), CAST($2 AS text[])::json[], CAST($3 AS text[])::json[])`,
		Args: []any{uuids, payloads, metadata},
	}, nil
}

// outboxOffsets deletes forwarded rows on ack. watermill-sql's queue adapter deletes every row of
// the batch, including the ones after a forward that did not complete (subscriber closing, ack
// deadline): they would be lost. Only the forwarded prefix, up to LastRow, is deleted here.
type outboxOffsets struct {
	wmsql.PostgreSQLQueueOffsetsAdapter
}

func newOutboxOffsets() outboxOffsets {
	return outboxOffsets{wmsql.PostgreSQLQueueOffsetsAdapter{DeleteOnAck: true, GenerateMessagesTableName: outboxTableName}}
}

func (a outboxOffsets) AckMessageQuery(params wmsql.AckMessageQueryParams) (wmsql.Query, error) {
	for i, row := range params.Rows {
		if row.Offset == params.LastRow.Offset {
			params.Rows = params.Rows[:i+1]
			break
		}
	}
	return a.PostgreSQLQueueOffsetsAdapter.AckMessageQuery(params)
}

// newWriter returns a watermill publisher that writes forwarder envelopes into the outbox through
// exec, which must be the transaction of the unit of work (txExecutor).
// Publish(topic, msgs...) takes the AMQP routing key (the event type) as topic.
func newWriter(exec wmsql.ContextExecutor) (message.Publisher, error) {
	pub, err := wmsql.NewPublisher(exec, wmsql.PublisherConfig{SchemaAdapter: newOutboxSchema(0, nil)}, nil)
	if err != nil {
		return nil, fmt.Errorf("outbox writer: %w", err)
	}
	return forwarder.NewPublisher(pub, forwarder.PublisherConfig{ForwarderTopic: Topic}), nil
}
