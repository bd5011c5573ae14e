package database

import (
	"database/sql/driver"
	"errors"
	"strings"
	"syscall"

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

// Unavailable SQLSTATEs: the server refuses or drops connections rather than failing the statement.
const (
	codeTooManyConnections = "53300"
	codeAdminShutdown      = "57P01"
	codeCrashShutdown      = "57P02"
	codeCannotConnectNow   = "57P03"
)

// IsUnavailable is true when PostgreSQL could not be reached or refused the connection (refused,
// reset, too many clients, shutting down or starting up): the request may succeed if retried later.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeTooManyConnections, codeAdminShutdown, codeCrashShutdown, codeCannotConnectNow:
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08") // connection_exception class
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) || errors.Is(err, driver.ErrBadConn) {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}
