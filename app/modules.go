package main

import (
	"github.com/keelson/keelson/platform/module"
)

// modules is the list of modules this binary runs, in wiring order. Adding a module is one line here.
func modules(cfg Config) ([]module.Module, error) {
	_ = cfg
	return nil, nil
}
