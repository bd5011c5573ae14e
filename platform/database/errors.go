package database

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// SQLSTATE codes the platform reacts to.
const (
	codeUniqueViolation      = "23505"
	codeSerializationFailure = "40001"
	codeInvalidCatalogName   = "3D000"
)

// IsMissingDatabase is true when the database named in the URL does not exist (`keelson migrate` creates it).
func IsMissingDatabase(err error) bool { return hasCode(err, codeInvalidCatalogName) }

// IsUniqueViolation is true for SQLSTATE 23505 only: "already done" for idempotent side effects.
// Every other error, a deadlock or another constraint included, is a real failure.
func IsUniqueViolation(err error) bool { return hasCode(err, codeUniqueViolation) }

// IsSerializationFailure is true for SQLSTATE 40001, what REPEATABLE READ and SERIALIZABLE
// writers get instead of zero rows when they lose a race.
func IsSerializationFailure(err error) bool { return hasCode(err, codeSerializationFailure) }

// UniqueConstraint names the violated constraint, or "" when err is not a unique violation.
func UniqueConstraint(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == codeUniqueViolation {
		return pgErr.ConstraintName
	}
	return ""
}

func hasCode(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}
