package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"cel.dev/cel-go/cel"

	"google.golang.org/protobuf/types/known/structpb"
)

// maxTransformedBytes bounds the body a transformation produces: a map may refer to data many times.
const maxTransformedBytes = 1 << 20

// jsonValueType is what a transformation's result is converted to: CEL converts every JSON-shaped
// value to it (timestamps to RFC 3339 strings, bytes to base64), and refuses the rest.
var jsonValueType = reflect.TypeFor[*structpb.Value]()

// requestBody is what a taken delivery sends: the event's body, or its subscription's transformation
// of the event. A transformation that fails on the event fails the attempt with the reason, visible
// in the attempt log; it is retried like any failed attempt.
func (s *Service) requestBody(t taken) ([]byte, error) {
	if t.body.err != nil {
		return nil, t.body.err
	}
	if t.sub.Transform == "" {
		return t.body.bytes, nil
	}
	return s.transformed(t.sub.Transform, t.event)
}

// transformed evaluates a transformation on an event and returns the JSON body it produced.
func (s *Service) transformed(src string, ev *eventRecord) ([]byte, error) {
	prg, err := s.transforms.of(src)
	if err != nil {
		return nil, fmt.Errorf("transform: %w", err)
	}
	return transformEvent(prg, ev)
}

// transformEvent runs a compiled transformation on an event: the JSON object it produced, or why not.
func transformEvent(prg cel.Program, ev *eventRecord) ([]byte, error) {
	in, err := newExpressionInput(ev.ID, ev.Type, ev.CreatedAt, ev.Data)
	if err != nil {
		return nil, fmt.Errorf("transform: event data: %w", err)
	}
	out, _, err := prg.Eval(map[string]any(in))
	if err != nil {
		return nil, fmt.Errorf("transform: %w", err)
	}
	native, err := out.ConvertToNative(jsonValueType)
	if err != nil {
		return nil, fmt.Errorf("transform: the result is not JSON: %w", err)
	}
	v := native.(*structpb.Value)
	if _, ok := v.GetKind().(*structpb.Value_StructValue); !ok {
		return nil, errors.New("transform: the result is not a JSON object")
	}
	body, err := json.Marshal(v.AsInterface()) // encoding/json sorts keys: every attempt sends the same bytes
	if err != nil {
		return nil, fmt.Errorf("transform: %w", err)
	}
	if len(body) > maxTransformedBytes {
		return nil, fmt.Errorf("transform: the body it produced is %d bytes, more than %d", len(body), maxTransformedBytes)
	}
	return body, nil
}

// deliveryPayload is the body the delivery's next attempt sends: the event's, or its subscription's
// transformation of it (the event's when the transformation fails on it: the attempts say why).
func (s *Service) deliveryPayload(ctx context.Context, d Delivery) (json.RawMessage, error) {
	ev, err := s.store.event(ctx, d.EventID)
	if err != nil {
		return nil, err
	}
	body, err := ev.body()
	if err != nil {
		return nil, err
	}
	transform, err := s.store.transformOf(ctx, d.SubscriptionID)
	if err != nil || transform == "" {
		return body, err
	}
	if out, err := s.transformed(transform, ev); err == nil {
		return out, nil
	}
	return body, nil
}
