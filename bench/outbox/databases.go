package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver
)

// throwaway creates an empty database and returns its URL and a drop function.
func throwaway(ctx context.Context, adminURL, prefix string) (string, func(), error) {
	admin, err := sql.Open("pgx", adminURL)
	if err != nil {
		return "", nil, err
	}
	defer admin.Close()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := prefix + "_" + hex.EncodeToString(b)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create %s: %w", name, err)
	}
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	drop := func() {
		admin, err := sql.Open("pgx", adminURL)
		if err != nil {
			return
		}
		defer admin.Close()
		_, _ = admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	return u.String(), drop, nil
}
