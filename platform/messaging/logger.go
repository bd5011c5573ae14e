package messaging

import (
	"sync/atomic"

	"github.com/ThreeDotsLabs/watermill"
)

// routerStoppedMsg is what a watermill router logs, as an error, once all its handlers have stopped.
const routerStoppedMsg = "All handlers stopped, closing router"

// stopAwareLogger is watermill's logger, except that a router whose handlers stopped because the bus
// is stopping says so at debug level: the bus closes subscribers before routers (Run), so every
// graceful stop would otherwise log one error per router. Handlers that stop on their own still do.
type stopAwareLogger struct {
	watermill.LoggerAdapter
	stopping *atomic.Bool
}

func (l stopAwareLogger) Error(msg string, err error, fields watermill.LogFields) {
	if msg == routerStoppedMsg && l.stopping.Load() {
		l.Debug(msg, fields)
		return
	}
	l.LoggerAdapter.Error(msg, err, fields)
}

func (l stopAwareLogger) With(fields watermill.LogFields) watermill.LoggerAdapter {
	return stopAwareLogger{LoggerAdapter: l.LoggerAdapter.With(fields), stopping: l.stopping}
}
