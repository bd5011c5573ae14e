package webhooks

import (
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
)

// Subscription filters and transformations are CEL expressions over the event: `id` and `type`
// (strings), `timestamp` (a timestamp) and `data` (the event's data, a map from JSON). CEL is
// side-effect free and never loops unboundedly; each evaluation is also stopped at a cost limit.
const (
	maxExpressionLength = 4096
	// expressionCostLimit bounds one evaluation (CEL's cost units, about one per operation and per
	// element a macro visits): an event of 256 KiB cannot make a filter run for long.
	expressionCostLimit = 100_000
	// expressionCacheSize bounds the compiled programs a replica keeps; subscriptions sharing an
	// expression share its program.
	expressionCacheSize = 4096
)

// expressionKind tells what an expression must produce.
type expressionKind int

const (
	filterExpression    expressionKind = iota // a bool: true delivers
	transformExpression                       // a map: the new request body
)

var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("id", cel.StringType),
		cel.Variable("type", cel.StringType),
		cel.Variable("timestamp", cel.TimestampType),
		cel.Variable("data", cel.MapType(cel.StringType, cel.DynType)),
		// JSON numbers are doubles: `data.amount > 100` must not need `100.0`.
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(maxExpressionLength),
		cel.ParserRecursionLimit(64),
	)
})

// compileExpression checks an expression and returns its program; the error names the position of
// each problem (line and column, 1-based) so a client can point at it.
func compileExpression(src string, kind expressionKind) (cel.Program, error) {
	if len(src) > maxExpressionLength {
		return nil, fmt.Errorf("must be at most %d bytes", maxExpressionLength)
	}
	if strings.ContainsRune(src, 0) || !utf8.ValidString(src) {
		return nil, errors.New("must be valid UTF-8 without NUL characters")
	}
	if strings.TrimSpace(src) == "" {
		return nil, errors.New("must not be blank (omit it, or send \"\" to remove it)")
	}
	env, err := celEnv()
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		msgs := make([]string, 0, len(iss.Errors()))
		for _, e := range iss.Errors() {
			if e.Location.Line() < 1 { // a limit of the whole expression (its nesting) has no position
				msgs = append(msgs, e.Message)
			} else {
				msgs = append(msgs, fmt.Sprintf("line %d, column %d: %s", e.Location.Line(), e.Location.Column()+1, e.Message))
			}
			if len(msgs) == 3 {
				break
			}
		}
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	out := ast.OutputType()
	switch kind {
	case filterExpression:
		if !out.IsAssignableType(cel.BoolType) {
			return nil, fmt.Errorf("must produce a bool (true delivers the event), not %s", out)
		}
	case transformExpression:
		if !cel.MapType(cel.StringType, cel.DynType).IsAssignableType(out) && !out.IsExactType(cel.DynType) {
			return nil, fmt.Errorf("must produce a map (the request body), not %s", out)
		}
	}
	// OptOptimize folds constant calls now, so a call that can only fail (timestamp("")) fails here.
	prg, err := env.Program(ast, cel.CostLimit(expressionCostLimit), cel.InterruptCheckFrequency(100),
		cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, fmt.Errorf("must not fail on its constant arguments: %w", err)
	}
	return prg, nil
}

// validateExpression accepts "" (none) or an expression that compiles to kind.
func validateExpression(src string, kind expressionKind) error {
	if src == "" {
		return nil
	}
	_, err := compileExpression(src, kind)
	return err
}

// expressionInput is what an expression sees of one event, built once per event.
type expressionInput map[string]any

func newExpressionInput(id, eventType string, at time.Time, data json.RawMessage) (expressionInput, error) {
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	if m == nil {
		m = map[string]any{}
	}
	return expressionInput{"id": id, "type": eventType, "timestamp": at.UTC(), "data": m}, nil
}

// programs caches compiled expressions by their text, least recently used dropped first. Programs are
// immutable and safe for concurrent evaluation.
type programs struct {
	mu    sync.Mutex
	kind  expressionKind
	max   int
	byKey map[string]*list.Element
	order list.List // front: most recently used
}

type cachedProgram struct {
	src string
	prg cel.Program
	err error
}

func newPrograms(kind expressionKind, size int) *programs {
	return &programs{kind: kind, max: size, byKey: map[string]*list.Element{}}
}

// of returns the program of src, compiling it on first use; a compile error is cached as well.
func (p *programs) of(src string) (cel.Program, error) {
	p.mu.Lock()
	if el, ok := p.byKey[src]; ok {
		p.order.MoveToFront(el)
		c := el.Value.(*cachedProgram)
		p.mu.Unlock()
		return c.prg, c.err
	}
	p.mu.Unlock()
	prg, err := compileExpression(src, p.kind) // outside the lock: compiling takes tens of microseconds
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.byKey[src]; !ok {
		p.byKey[src] = p.order.PushFront(&cachedProgram{src: src, prg: prg, err: err})
		for p.order.Len() > p.max {
			last := p.order.Back()
			p.order.Remove(last)
			delete(p.byKey, last.Value.(*cachedProgram).src)
		}
	}
	return prg, err
}

func (p *programs) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.order.Len()
}

// filterMatches evaluates a filter; an error (a missing field, a type mismatch, the cost limit) is
// false: the endpoint asked for events the filter accepts, and this one was not shown to be.
func filterMatches(prg cel.Program, in expressionInput) (bool, error) {
	out, _, err := prg.Eval(map[string]any(in))
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("filter produced %s, not a bool", out.Type())
	}
	return bool(b), nil
}
