package messaging

import (
	"fmt"
	"time"

	wamqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"
)

// wireFormat is watermill-amqp's DefaultMarshaler (persistent, metadata as headers, the UUID in
// _watermill_message_uuid) plus the standard AMQP properties, so any AMQP client can read an event.
var wireFormat = wamqp.DefaultMarshaler{PostprocessPublishing: func(p amqp.Publishing) amqp.Publishing {
	p.ContentType = "application/json"
	if id, ok := p.Headers[HeaderEventID].(string); ok {
		p.MessageId = id
	}
	if t, ok := p.Headers[HeaderEventType].(string); ok {
		p.Type = t
	}
	if s, ok := p.Headers[HeaderEventSource].(string); ok {
		p.AppId = s
	}
	if c, ok := p.Headers[HeaderCorrelationID].(string); ok {
		p.CorrelationId = c
	}
	if o, ok := p.Headers[HeaderOccurredAt].(string); ok {
		if t, err := time.Parse(time.RFC3339Nano, o); err == nil {
			p.Timestamp = t
		}
	}
	return p
}}

// unmarshalDelivery never fails: a header that is not a string is kept in its printed form, so a
// foreign message reaches the handler (and the dead-letter queue) instead of looping on nack.
func unmarshalDelivery(d amqp.Delivery) *message.Message {
	id := d.MessageId
	if v, ok := d.Headers[wamqp.DefaultMessageUUIDHeaderKey].(string); ok && v != "" {
		id = v
	}
	msg := message.NewMessage(id, d.Body)
	for k, v := range d.Headers {
		if k == wamqp.DefaultMessageUUIDHeaderKey {
			continue
		}
		if s, ok := v.(string); ok {
			msg.Metadata.Set(k, s)
		} else {
			msg.Metadata.Set(k, fmt.Sprint(v))
		}
	}
	return msg
}
