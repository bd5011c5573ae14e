package messaging

import (
	"fmt"

	wmsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
)

// The outbox is one table, created by migrations/platform/00003_outbox.sql. Writer and forwarder
// must agree on its name, so both take it from here.
const (
	// OutboxTopic is the watermill topic of the outbox (the forwarder's topic).
	OutboxTopic = "outbox"
	// OutboxTable is the table watermill-sql reads and writes for OutboxTopic.
	OutboxTable = "outbox_messages"
)

func outboxTableName(string) string { return `"` + OutboxTable + `"` }

// outboxSchema is watermill-sql's queue schema over the outbox table. shard/shards split the rows
// between forwarders of one process, which then lock disjoint rows and publish in parallel.
func outboxSchema(batchSize, shard, shards int) wmsql.PostgreSQLQueueSchema {
	s := wmsql.PostgreSQLQueueSchema{
		GenerateMessagesTableName: outboxTableName,
		SubscribeBatchSize:        batchSize,
	}
	if shards > 1 {
		where := fmt.Sprintf(`"offset" %% %d = %d`, shards, shard)
		s.GenerateWhereClause = func(wmsql.GenerateWhereClauseParams) (string, []any) { return where, nil }
	}
	return s
}

func outboxOffsets() wmsql.PostgreSQLQueueOffsetsAdapter {
	return wmsql.PostgreSQLQueueOffsetsAdapter{DeleteOnAck: true, GenerateMessagesTableName: outboxTableName}
}

// NewOutboxWriter returns a watermill publisher that writes forwarder envelopes into the outbox
// through exec, which must be the transaction of the unit of work (see platform/outbox).
// Publish(topic, msgs...) takes the AMQP routing key (the event type) as topic.
func NewOutboxWriter(exec wmsql.ContextExecutor) (message.Publisher, error) {
	pub, err := wmsql.NewPublisher(exec, wmsql.PublisherConfig{SchemaAdapter: outboxSchema(0, 0, 1)}, nil)
	if err != nil {
		return nil, fmt.Errorf("outbox writer: %w", err)
	}
	return forwarder.NewPublisher(pub, forwarder.PublisherConfig{ForwarderTopic: OutboxTopic}), nil
}
