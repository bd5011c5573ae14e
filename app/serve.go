package main

import (
	"context"
	"errors"
	"log/slog"
)

func serve(ctx context.Context, cfg Config, logger *slog.Logger) error {
	_ = ctx
	_ = cfg
	_ = logger
	return errors.New("serve: not wired yet")
}
